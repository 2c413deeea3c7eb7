package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// submit --wait follows a task to its end and says how it ended in its
// exit code.
func TestSubmitWaitExitCodes(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir(), "--max-retries", "0")
	for _, tc := range []struct {
		name, prompt string
		code         int
		want         string
	}{
		{"completed", "@progress 2\n@output hello", 0, "Attempt 1  completed"},
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
