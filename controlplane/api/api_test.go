package api

import (
	"encoding/json"
	"testing"
)

// The closed sets go on the wire as these strings, which agents, scripts
// and other control planes already read and write: a constant that
// changes breaks them.
func TestClosedSetsKeepTheirWireValues(t *testing.T) {
	for _, c := range []struct {
		v    any
		wire string
	}{
		{AgentRunning, "running"}, {AgentDraining, "draining"}, {AgentOffline, "offline"},
		{StatusAccepted, "accepted"}, {StatusDuplicate, "duplicate"}, {StatusRejected, "rejected"},
		{ReasonTerminal, "terminal"}, {ReasonUnknown, "unknown_task"}, {ReasonLease, "lease_mismatch"}, {ReasonInvalid, "invalid"},
		{Invalid("no key"), "invalid: no key"},
		{PreferAny, "any"}, {PreferGUI, "gui"},
		{DecisionAccept, "accept"}, {DecisionDecline, "decline"},
		{PrincipalOperator, "operator"}, {PrincipalAgent, "agent"}, {PrincipalRegistration, "registration"},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != `"`+c.wire+`"` {
			t.Errorf("%#v goes on the wire as %s (%v), want %q", c.v, b, err, c.wire)
		}
	}
	if len(AgentStates) != 3 || len(EventStatuses) != 3 {
		t.Errorf("the lists: %v, %v", AgentStates, EventStatuses)
	}
}
