package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/state"
)

// A queued task no online agent can take says why on its card.
func TestTheCardOfAnUnroutableTaskSaysWhy(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	v, err := cp.Operator.CreateTask(t.Context(), api.CreateTaskRequest{Prompt: "train it", Requires: []state.Requirement{"executor=codex", "label=gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	resp, body := b.get("/tasks")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tasks: %s", resp.Status)
	}
	want := `<span class="unroutable">unroutable: no agent with executor=codex</span>`
	if !strings.Contains(body, "task-"+v.ID) || !strings.Contains(body, want) {
		t.Errorf("the tasks page lacks %s\n%s", want, body)
	}
}
