package metrics

import "github.com/edgeagent/agent/state"

// SendResult is what one delivery try made of a record: the values of
// agent_sends_total's result label.
type SendResult string

// The results of a delivery try.
const (
	// SendSent: the control plane accepted the record.
	SendSent SendResult = "sent"
	// SendDuplicate: it had the record already (a replay); delivered too.
	SendDuplicate SendResult = "duplicate"
	// SendDead: it refused the record for good; the record is dead.
	SendDead SendResult = "dead"
	// SendFailed: the try failed (unreachable, 5xx, …); the record stays
	// pending and goes again.
	SendFailed SendResult = "failed"
)

var sendResults = []SendResult{SendSent, SendDuplicate, SendDead, SendFailed}

// codeLabel is an error code as a label value: a code of the closed set,
// "none" for no error, "other" for anything an executor made up.
func codeLabel(e *state.Error) string {
	if e == nil || e.Code == "" {
		return "none"
	}
	if e.Code.Known() {
		return string(e.Code)
	}
	return "other"
}

// phaseLabel is a phase as a label value; one the closed set does not
// know (a newer file) is "other".
func phaseLabel(p state.Phase) string {
	if p.Valid() {
		return string(p)
	}
	return "other"
}
