package api

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/edgeagent/agent/state"
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

// A repository is named by a simple word, and a base is a ref git cannot
// take for an option or a terminal for a command.
func TestRepoNamesAndBases(t *testing.T) {
	for name, ok := range map[string]bool{
		"site": true, "infra-2": true, "my_repo.git": true, "A": true, "0x": true,
		"": false, "-x": false, ".hidden": false, "a/b": false, "../etc": false, "a b": false, "é": false,
		string(make([]byte, MaxRepoNameBytes+1)): false,
	} {
		if err := CheckRepoName(name); (err == nil) != ok {
			t.Errorf("CheckRepoName(%q) = %v, want ok %v", name, err, ok)
		}
	}
	for ref, ok := range map[string]bool{
		"": true, "main": true, "release/2.1": true, "v1.2.3": true, "3f9c2e1": true, "origin/feature-é": true,
		"-x": false, "--upload-pack=x": false, "a b": false, "main\n": false, "main\x1b[2J": false, "\xff": false,
		string(make([]byte, MaxBaseBytes+1)): false,
	} {
		if err := CheckBase(ref); (err == nil) != ok {
			t.Errorf("CheckBase(%q) = %v, want ok %v", ref, err, ok)
		}
	}
	if err := CheckRepos(make([]string, MaxReposPerAgent+1)); err == nil {
		t.Error("CheckRepos took more than the maximum")
	}
}

func TestLabels(t *testing.T) {
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, c := range []struct {
		labels map[string]string
		ok     bool
	}{
		{nil, true},
		{map[string]string{"team": "infra", "gpu.count": "2", "site": "lyon 2"}, true},
		{map[string]string{"": "x"}, false},
		{map[string]string{"-team": "x"}, false},
		{map[string]string{"team": "a\nb"}, false},
		{map[string]string{"team": strings.Repeat("x", MaxLabelValueBytes+1)}, false},
		{many, false},
	} {
		if err := CheckLabels(c.labels); (err == nil) != c.ok {
			t.Errorf("CheckLabels(%q) = %v, want ok %v", c.labels, err, c.ok)
		}
	}
}

// A task's totals of cut output add up its attempts' and hold at the most
// an int64 holds: an agent may say it withheld as much as it likes.
func TestCutTotalsDoNotWrap(t *testing.T) {
	task := &state.Task{ID: "t-1", Output: []state.AttemptOutput{{Attempt: 1, CutLines: 3, CutBytes: 30}, {Attempt: 2, CutLines: 4, CutBytes: 40}}}
	if v := ViewOf(task); v.OutputCutLines != 7 || v.OutputCutBytes != 70 {
		t.Errorf("totals %d lines, %d bytes, want 7, 70", v.OutputCutLines, v.OutputCutBytes)
	}
	task.Output[0].CutLines, task.Output[1].CutLines = math.MaxInt64, math.MaxInt64
	task.Output[0].CutBytes, task.Output[1].CutBytes = math.MaxInt64-1, 5
	if v := ViewOf(task); v.OutputCutLines != math.MaxInt64 || v.OutputCutBytes != math.MaxInt64 {
		t.Errorf("totals %d lines, %d bytes, want both at the most an int64 holds", v.OutputCutLines, v.OutputCutBytes)
	}
}
