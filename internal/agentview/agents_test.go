package agentview

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane/api"
)

// TestMain checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The table says each agent a line under its header, with a dash for
// what an agent left unsaid, and shows what an agent said of itself
// inert.
func TestTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	agents := []api.AgentView{
		{AgentID: "vm-7", Online: true, State: api.AgentDraining, Health: api.Health{Grade: "available"},
			Capabilities: api.Capabilities{Executor: "codex", Models: []string{"gpt-5", "gpt-5-mini"}, OS: "linux", Arch: "arm64"}, LastHeartbeat: now.Add(-3 * time.Second), Capacity: api.Capacity{Max: 2, Running: 1},
			Running: []api.RunningTask{{TaskID: "t-0c1d2e3f4a", Attempt: 1}}, Repos: []string{"app", "site"},
			GrantedLabels: map[string]string{"tier": "secure", "gpu": "a100"}, Labels: map[string]string{"team": "infra"},
			Replica: "cp-1"},
		{AgentID: "vm-9\x1b[2J", Online: false, State: api.AgentRunning, LastHeartbeat: now.Add(-2 * time.Hour), Capacity: api.Capacity{Max: 2}},
	}
	var b strings.Builder
	Table(&b, agents, now)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("the table has %d lines, want a header and 2:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"AGENT", "STATE", "HEALTH", "EXECUTOR", "MODELS", "HEARTBEAT", "RUNNING", "TASKS", "REPOS", "LABELS", "SELF-DESCRIBED", "PLATFORM", "REPLICA"},
		{"vm-7", "draining", "available", "codex", "gpt-5,gpt-5-mini", "3s", "ago", "1", "of", "2", "t-0c1d2e3f4a", "(attempt", "1)", "app,site", "gpu=a100,tier=secure", "team=infra", "linux/arm64", "cp-1"},
		{`vm-9\x1b[2J`, "offline", "-", "-", "-", "2h", "ago", "0", "of", "2", "-", "-", "-", "-", "-", "-"},
	} {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("line %d: %q, want %q", i, got, want)
		}
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Error("an escape an agent sent reached the table")
	}
}

func TestState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a    api.AgentView
		want string
	}{
		{api.AgentView{Online: false, State: api.AgentDraining}, "offline"},
		{api.AgentView{Online: true}, "running"},
		{api.AgentView{Online: true, State: api.AgentDraining}, "draining"},
	} {
		if got := State(tc.a); got != tc.want {
			t.Errorf("State(%+v) = %q, want %q", tc.a, got, tc.want)
		}
	}
}

func TestLabelChanges(t *testing.T) {
	t.Parallel()
	got, err := LabelChanges([]string{"tier=secure", "gpu-", "zone=a-b"})
	want := api.LabelsRequest{Set: map[string]string{"tier": "secure", "zone": "a-b"}, Remove: []string{"gpu"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LabelChanges = %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range []struct{ arg, says string }{
		{"tier", `"tier": want KEY=VALUE to grant a label, or KEY- to take one back`},
		{"../x-", `"../x-": `},
		{"../x=1", `"../x=1": `},
	} {
		if _, err := LabelChanges([]string{tc.arg}); err == nil || !strings.HasPrefix(err.Error(), tc.says) {
			t.Errorf("LabelChanges(%q) = %v, want %q…", tc.arg, err, tc.says)
		}
	}
	if _, err := LabelChanges([]string{"a=1", "a=2"}); err == nil || err.Error() != `"a=2": label a is given twice` {
		t.Errorf("a label given twice: %v", err)
	}
	if got := LabelsText(nil); got != "" {
		t.Errorf("no labels read %q", got)
	}
}

// With no agent, ls says so, naming the control plane asked.
func TestListOfNone(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	List(&b, nil, "http://127.0.0.1:8080", time.Now())
	if b.String() != "no agent has been heard from at http://127.0.0.1:8080\n" {
		t.Errorf("no agents: %q", b.String())
	}
	b.Reset()
	List(&b, []api.AgentView{{AgentID: "vm-1"}}, "http://127.0.0.1:8080", time.Now())
	if !strings.HasPrefix(b.String(), "AGENT ") || !strings.Contains(b.String(), "\nvm-1 ") {
		t.Errorf("one agent: %q", b.String())
	}
}
