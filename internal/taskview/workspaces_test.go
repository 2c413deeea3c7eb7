package taskview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeagent/agent/workspace"
)

// TestWorkspacesTable: a row per workspace with its state, a total, and
// what a task wrote (its repository's name) shown inert.
func TestWorkspacesTable(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Workspaces(&b, nil, "/w"); err != nil || b.String() != "no workspaces in /w\n" {
		t.Fatalf("empty: %v %q", err, b.String())
	}
	list := []workspace.Info{
		{TaskID: "t-1", Repo: "app", Branch: "agent/t-1", Bytes: 1500},
		{TaskID: "t-2", Repo: "a\x1b[2Jpp", Branch: "agent/t-2", Bytes: 2048, Uncommitted: true},
	}
	b.Reset()
	if err := Workspaces(&b, list, "/w"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"TASK", "t-1", "clean", "kept: uncommitted changes", `a\x1b[2Jpp`, "2 workspaces, ", ", in /w\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a control character reached the terminal:\n%q", out)
	}
	b.Reset()
	if err := Workspaces(&b, list[:1], "/w"); err != nil || !strings.Contains(b.String(), "1 workspace, ") {
		t.Errorf("one: %v\n%s", err, b.String())
	}
	j, err := json.Marshal(WorkspaceViews(list))
	if err != nil || !strings.Contains(string(j), `"state":"kept: uncommitted changes"`) || !strings.Contains(string(j), `"task_id":"t-1"`) {
		t.Errorf("json: %v %s", err, j)
	}
}
