//go:build faults

package filestore

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// crashSpec is AGENT_CP_CRASH, read once.
var crashSpec = os.Getenv("AGENT_CP_CRASH")

// at reports whether the process should crash at point during b.
func (b crashBatch) at(point crashPoint) bool {
	if crashSpec == "" {
		return false
	}
	name, when, _ := strings.Cut(crashSpec, ":")
	return crashPoint(name) == point && (when == fmt.Sprint(b.n) || when == "complete" && b.complete || when == "notify" && b.notify)
}

// crash ends the process as a power cut would, without any clean-up.
func crash() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
