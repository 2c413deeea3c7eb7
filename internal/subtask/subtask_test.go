package subtask

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/submission"
	"github.com/edgeagent/agent/internal/taskfollow"
)

// TestMain checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Outside a task, or with its environment incomplete, each missing piece
// is said; the token never is.
func TestFromEnv(t *testing.T) {
	t.Parallel()
	const tok = "task-secret-0123456789"
	if _, err := FromEnv(envOf(nil), "agent/test"); !errors.Is(err, ErrOutsideTask) {
		t.Errorf("no token: %v", err)
	}
	_, err := FromEnv(envOf(map[string]string{api.EnvTaskToken: tok, EnvTaskID: "t-1"}), "agent/test")
	if err == nil || !strings.HasPrefix(err.Error(), api.EnvControlPlane+" is not set") || strings.Contains(err.Error(), tok) {
		t.Errorf("no control plane: %v", err)
	}
	_, err = FromEnv(envOf(map[string]string{api.EnvTaskToken: tok, api.EnvControlPlane: "http://127.0.0.1:1"}), "agent/test")
	if err == nil || !strings.HasPrefix(err.Error(), "AGENT_TASK_ID is not set") || strings.Contains(err.Error(), tok) {
		t.Errorf("no task id: %v", err)
	}
}

// A task's executor, with the token its grant carries, submits subtasks,
// lists them, asks what it may delegate to, cancels them and waits for
// them, against a control plane on loopback.
func TestInTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := servertest.Start(t, servertest.Options{})
	if _, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "the parent"}); err != nil {
		t.Fatal(err)
	}
	grant := servertest.Claim(t, cp.Agent(t, "vm-1"), "vm-1")
	parent := grant.Task.ID
	in, err := FromEnv(envOf(map[string]string{api.EnvTaskToken: grant.TaskToken, api.EnvControlPlane: cp.URL, EnvTaskID: parent}), "agent/test")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, words := range [][]string{{"count", "the", "files"}, {"read", "the", "docs"}} {
		req, err := submission.Subtask("", words, []string{"type=explorer"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := in.Client.CreateSubtask(ctx, in.TaskID, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	views, tasks, err := in.Subtasks(ctx)
	if err != nil || len(views) != 2 || len(tasks) != 2 || tasks[0].ID != ids[0] || tasks[1].Prompt != "read the docs" {
		t.Fatalf("the subtasks: %v, %v", tasks, err)
	}
	a, err := in.Allowed(ctx)
	if err != nil || a.TaskID != parent || a.Submitted != 2 || a.Depth != 0 || a.Delegation == nil || len(a.Lines) == 0 {
		t.Fatalf("allowed: %+v, %v", a, err)
	}

	var b strings.Builder
	a.Print(&b)
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); lines[0] != "task "+parent+" (type general, depth 0) may delegate to:" || len(lines) != 1+len(a.Lines) {
		t.Errorf("allowed says:\n%s", b.String())
	}

	if what, err := in.Cancel(ctx, ids[0]); err != nil || what != "cancelled" {
		t.Fatalf("cancel a queued subtask: %q, %v", what, err)
	}
	got, done, err := in.Wait(ctx, nil, 300*time.Millisecond, os.Stderr)
	if taskfollow.ErrCode(err) != taskfollow.ExitWaitTimeout || !reflect.DeepEqual(got, ids) || taskfollow.EndedOf(got, done) != 1 {
		t.Fatalf("a bounded wait with one of two ended: %v, %v, %d ended", err, got, taskfollow.EndedOf(got, done))
	}
	if _, err := in.Cancel(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	got, done, err = in.Wait(ctx, ids[1:], 0, os.Stderr)
	if err != nil || len(got) != 1 || done[ids[1]] == nil {
		t.Fatalf("a wait for one: %v, %v", got, err)
	}
	_, done, err = in.Wait(ctx, nil, 0, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ended, failed := Ended(ids, done)
	if len(ended) != 2 || failed != 2 || ended[0].ID != ids[0] || len(Views(ended)) != 2 || Views(nil) != nil {
		t.Errorf("the ended subtasks: %v, %d failed", ended, failed)
	}
	var report strings.Builder
	if err := Report(&report, ids, done, true, time.Now()); err == nil || err.Error() != "subtask wait: 2 of 2 subtasks did not complete" ||
		!strings.HasPrefix(report.String(), "[\n  {") || strings.Count(report.String(), `"phase": "cancelled"`) != 2 {
		t.Errorf("the report, JSON: %v\n%s", err, report.String())
	}
	report.Reset()
	if err := Report(&report, ids, done, false, time.Now()); err == nil || !strings.Contains(report.String(), ids[0]) || !strings.Contains(report.String(), ids[1]) {
		t.Errorf("the report: %v\n%s", err, report.String())
	}
	if _, err := in.Cancel(ctx, "t-nosuchtask"); err == nil {
		t.Error("a cancel of a task not its own was not refused")
	}
}

// The control plane's [[delegate]] tables become its rules, in order; a
// label that does not read names its file and line.
func TestDelegateRules(t *testing.T) {
	t.Parallel()
	tab := &settings.Table{EnvPrefix: "TEST_", List: []*settings.Setting{{Name: "delegate", Default: []settings.FileTable(nil), Table: []settings.TableKey{
		{Name: "parent", Default: []string(nil)}, {Name: "child", Default: []string(nil)}, {Name: "max-depth", Default: 0}, {Name: "max-children", Default: 0},
	}, Help: "delegation rules"}}}
	resolve := func(text string) *settings.Resolved {
		t.Helper()
		file := filepath.Join(t.TempDir(), "cp.toml")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := tab.Resolve(pflag.NewFlagSet("test", pflag.ContinueOnError), file, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rules, err := DelegateRules(resolve(`[[delegate]]
parent = ["type=general"]
child = ["type=explorer"]
max-depth = 2
max-children = 3

[[delegate]]
child = ["type=explorer"]
`))
	want := []server.DelegateRule{{Parent: map[string]string{"type": "general"}, Child: map[string]string{"type": "explorer"}, MaxDepth: 2, MaxChildren: 3},
		{Child: map[string]string{"type": "explorer"}}}
	if err != nil || !reflect.DeepEqual(rules, want) {
		t.Fatalf("rules %+v, %v; want %+v", rules, err, want)
	}
	if rules, err := DelegateRules(nil); rules != nil || err != nil {
		t.Errorf("no config file: %v, %v", rules, err)
	}
	_, err = DelegateRules(resolve("[[delegate]]\n\nchild = [\"no label\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "cp.toml:3: [[delegate]] child: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a bad label: %v", err)
	}
}
