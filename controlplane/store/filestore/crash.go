package filestore

// Crash points, for the fault suite: in a build with -tags faults,
// AGENT_CP_CRASH=POINT:WHEN makes the control plane kill itself with
// SIGKILL at POINT during an events batch: WHEN is the batch's number (1
// is the first), or "complete" for the first batch that holds a
// completion. It proves that a crash there loses nothing the control plane
// accepted. A build without the tag (every binary shipped) holds no switch:
// no crash point fires, whatever the environment says (crash_off.go).
const (
	crashMidEvents   crashPoint = "mid-events"   // half of a batch's events written
	crashAfterEvents crashPoint = "after-events" // events stored, task files not saved
	crashAfterNotify crashPoint = "after-notify" // events and notifications stored, task files not saved
	crashAfterSave   crashPoint = "after-save"   // task files saved, the answer not sent
)

// crashPoint is a place in an events batch where the process may crash.
type crashPoint string

// crashBatch is the events batch a crash point may fire in.
type crashBatch struct {
	n        int  // its number
	complete bool // it holds a completion
}
