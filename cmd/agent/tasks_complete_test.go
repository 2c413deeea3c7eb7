package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTaskIDsCompleteFromTheDataDirectory runs the shell's completion
// request (cobra's __complete) for each command that takes a task id: the
// ids come from the data directory, each command offering the tasks it
// applies to, and the control plane the settings name is never asked.
func TestTaskIDsCompleteFromTheDataDirectory(t *testing.T) {
	t.Parallel()
	dataDir := saveTasks(t, colourTasks(t)) // t-done, t-failed, t-blocked (recoverable_failed), t-running
	var asked atomic.Int64
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { asked.Add(1) }))
	defer cp.Close()
	env := []string{"AGENT_CONTROL_PLANE=" + cp.URL, "AGENT_DATA_DIR=" + dataDir}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"tasks", "show", ""}, []string{"t-blocked", "t-done", "t-failed", "t-running"}},
		{[]string{"tasks", "show", "--data-dir", dataDir, "t-b"}, []string{"t-blocked"}},
		{[]string{"tasks", "logs", "t-"}, []string{"t-blocked", "t-done", "t-failed", "t-running"}},
		{[]string{"tasks", "retry", ""}, []string{"t-blocked"}},
		{[]string{"tasks", "cancel", ""}, []string{"t-running"}},
		{[]string{"tasks", "reply", ""}, nil},
		{[]string{"tasks", "show", "t-done", ""}, nil}, // one id only
	}
	for _, c := range cases {
		r := runAgentEnv(t, env, append([]string{"__complete"}, c.args...)...)
		if r.code != 0 {
			t.Errorf("__complete %v: exit %d: %s", c.args, r.code, r.stderr)
			continue
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				id, desc, _ := strings.Cut(l, "\t")
				got = append(got, id)
				if desc == "" {
					t.Errorf("__complete %v: %q has no description", c.args, l)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("__complete %v: %v, want %v\n%s", c.args, got, c.want, r.stdout)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("completion asked the control plane %d times", n)
	}
}
