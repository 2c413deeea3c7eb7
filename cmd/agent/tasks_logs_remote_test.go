package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// tasks logs --remote prints the output the control plane keeps, from
// any machine, as the agent's own log files hold it: every attempt with
// its header, or one; and -f follows the task to its end.
func TestTasksLogsRemote(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	remote := func(args ...string) []string {
		return append(append([]string{"tasks", "logs"}, args...), "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile)
	}

	id := submit(t, c, "Summarize\n@output hello from afar\n@output \x1b[1;31mred\x1b[0m, as a CLI colours it\n@fail rate_limit")
	if v := c.waitDone(t, id); len(v.Attempts) != 2 {
		t.Fatalf("want two attempts: %s with %d", v.Phase, len(v.Attempts))
	}
	r := runAgent(t, remote(id)...)
	for _, want := range []string{"== attempt 1 ==", "== attempt 2 ==", "hello from afar"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("tasks logs --remote: exit %d, lacks %q:\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	// Colours are for a terminal: the text is shown, no escape.
	if !strings.Contains(r.stdout, "red, as a CLI colours it") || strings.Contains(r.stdout, "[1;31m") || strings.Contains(r.stdout, "x1b") {
		t.Errorf("tasks logs --remote shows a CLI's colours:\n%s", r.stdout)
	}
	// The same lines as the agent's own files, time and stream included.
	local := runAgent(t, "tasks", "logs", id, "--data-dir", dataDir)
	if local.stdout != r.stdout {
		t.Errorf("remote and local logs differ:\nremote:\n%s\nlocal:\n%s", r.stdout, local.stdout)
	}
	one := runAgent(t, remote(id, "--attempt", "2")...)
	if one.code != 0 || strings.Contains(one.stdout, "==") || !strings.Contains(one.stdout, "attempt 2 model") || strings.Contains(one.stdout, "attempt 1 model") {
		t.Errorf("--attempt 2:\n%s%s", one.stdout, one.stderr)
	}

	// -f from the start of a task to its end.
	slow := submit(t, c, "Count\n@output counting\n@sleep 300ms\n@output counted")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := agentCmd(ctx, nil, remote(slow, "-f")...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("tasks logs --remote -f: %v\n%s%s", err, out, stderr)
	}
	got := strings.TrimSpace(string(out))
	if !strings.Contains(got, "counting") || !strings.Contains(got, "counted") || !strings.HasPrefix(got[strings.LastIndex(got, "\n")+1:], "-- completed") {
		t.Errorf("tasks logs --remote -f:\n%s", got)
	}

	if r := runAgent(t, remote("t-nosuch")...); r.code == 0 || !strings.Contains(r.stderr, "t-nosuch") {
		t.Errorf("an unknown task: exit %d\n%s", r.code, r.stderr)
	}
}
