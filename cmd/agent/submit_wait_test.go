package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/state"
)

// submit --wait follows a task to its end and says how it ended in its
// exit code.
func TestSubmitWaitExitCodes(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir(), "--max-retries", "0")
	for _, tc := range []struct {
		name, prompt string
		code         int
		want         string
	}{
		{"completed", "@progress 2\n@output hello", 0, "Attempt 1/1  completed"},
		{"failed", "@fail quota", 1, "quota"},
		{"needs a person", "@side-effect rotated a key\n@fail network\n@no-session", 3, "blocked: side_effect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAgent(t, "submit", "--wait", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", tc.prompt)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.want) {
				t.Fatalf("exit %d, want %d; output lacks %q?\n%s%s", r.code, tc.code, tc.want, r.stdout, r.stderr)
			}
			if r.stderr != "" {
				t.Errorf("stderr %q: the exit code says it all", r.stderr)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		r := runAgent(t, "submit", "--wait", "--json", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", "@output hi")
		var v api.TaskView
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 || v.Phase != state.PhaseCompleted {
			t.Fatalf("exit %d, %v: %s", r.code, err, r.stdout)
		}
	})
}

// submit --wait never waits in silence: a task no online agent can take
// ends the wait at once with its own exit code (the task stays queued),
// --wait-queued waits on, and --timeout bounds any wait.
func TestSubmitWaitUnroutableAndTimeout(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir())
	base := []string{"submit", "--wait", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", "@output hi", "--require", "label=gpu"}

	r := runAgent(t, base...)
	if r.code != taskfollow.ExitUnroutable || !strings.Contains(r.stderr, "no online agent can take it: no agent with label=gpu") || !strings.Contains(r.stderr, "--wait-queued") {
		t.Fatalf("unroutable: exit %d, want %d\n%s%s", r.code, taskfollow.ExitUnroutable, r.stdout, r.stderr)
	}
	r = runAgent(t, append(base, "--json")...)
	var v api.TaskView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != taskfollow.ExitUnroutable || v.Phase != state.PhaseQueued || v.Unroutable == "" {
		t.Fatalf("unroutable --json: exit %d, %v: %s%s", r.code, err, r.stdout, r.stderr)
	}
	if got := c.task(t, v.ID); got.Phase != state.PhaseQueued {
		t.Fatalf("the task left the queue: %s", got.Phase)
	}

	r = runAgent(t, append(base, "--wait-queued", "--timeout", "1s")...)
	if r.code != taskfollow.ExitWaitTimeout || !strings.Contains(r.stderr, "has not ended within --timeout 1s; it goes on") {
		t.Fatalf("--wait-queued --timeout: exit %d, want %d\n%s%s", r.code, taskfollow.ExitWaitTimeout, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "unroutable: no agent with label=gpu") {
		t.Errorf("--wait-queued says nothing of why the task waits:\n%s", r.stdout)
	}

	for _, args := range [][]string{{"--timeout", "1s"}, {"--wait-queued"}} {
		r = runAgent(t, append([]string{"submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", "x"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "needs --wait") {
			t.Errorf("%v without --wait: exit %d\n%s", args, r.code, r.stderr)
		}
	}
}
