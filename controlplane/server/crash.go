package server

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Crash points, for the fault suite: AGENT_CP_CRASH=POINT:WHEN makes the
// control plane kill itself with SIGKILL at POINT during an events batch:
// WHEN is the batch's number (1 is the first), or "complete" for the first
// batch that holds a completion. It proves that a crash there loses
// nothing the control plane accepted.
const (
	crashMidEvents   = "mid-events"   // half of a batch's events written
	crashAfterEvents = "after-events" // events stored, task files not saved
	crashAfterSave   = "after-save"   // task files saved, the answer not sent
)

// crashSpec is AGENT_CP_CRASH, read once.
var crashSpec = os.Getenv("AGENT_CP_CRASH")

// crashBatch is the events batch a crash point may fire in.
type crashBatch struct {
	n        int  // its number
	complete bool // it holds a completion
}

// at reports whether the process should crash at point during b.
func (b crashBatch) at(point string) bool {
	if crashSpec == "" {
		return false
	}
	name, when, _ := strings.Cut(crashSpec, ":")
	return name == point && (when == fmt.Sprint(b.n) || when == "complete" && b.complete)
}

// crash ends the process as a power cut would, without any clean-up.
func crash() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
