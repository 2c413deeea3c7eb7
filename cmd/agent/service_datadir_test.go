package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/state"
)

// seedTask makes a data directory holding one task, and an outbox.
func seedTask(t *testing.T, id string) string {
	t.Helper()
	dir := seedOutbox(t)
	store, err := state.OpenStore(filepath.Join(dir, "tasks"))
	must(t, err)
	must(t, store.Save(&state.Task{ID: id, Prompt: "p", Phase: state.PhaseCompleted}))
	return dir
}

// The read commands find the installed service's data directory when
// nothing names one: tasks ls, outbox stats and stop read the one the
// unit names, not the default. The environment still wins; where another
// service or the default directory could be meant, they say which they
// read, in one line.
func TestReadCommandsFollowTheService(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	configHome, stateHome := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + configHome, "XDG_STATE_HOME=" + stateHome,
		"PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	tok := tokenFile(t)
	one, two := seedTask(t, "t-one"), seedTask(t, "t-two")
	install := func(data string, flags ...string) {
		t.Helper()
		args := append(append([]string{"service", "install", "--no-start"}, flags...), "--", "--control-plane", "https://cp.example.com", "--token-file", tok, "--data-dir", data)
		if r := runAgentEnv(t, env, args...); r.code != 0 {
			t.Fatalf("install: %+v", r)
		}
	}
	unit := filepath.Join(configHome, "systemd", "user", "agent.service")

	// Nothing installed: the default, as before.
	wantOneLineError(t, runAgentEnv(t, env, "tasks", "ls"), 1, filepath.Join(stateHome, "agent"))
	install(one)
	r := runAgentEnv(t, env, "tasks", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "t-one") || r.stderr != "" {
		t.Errorf("tasks ls does not read the service's data directory %s, quietly: %+v", one, r)
	}
	// The default directory has no outbox: stats would fail there.
	if r := runAgentEnv(t, env, "outbox", "stats"); r.code != 0 || r.stderr != "" {
		t.Errorf("outbox stats does not read the service's outbox: %+v", r)
	}
	wantOneLineError(t, runAgentEnv(t, env, "stop", "--no-wait"), 1, one)
	if r := runAgentEnv(t, append(env, "AGENT_DATA_DIR="+two), "tasks", "ls"); !strings.Contains(r.stdout, "t-two") || strings.Contains(r.stdout, "t-one") {
		t.Errorf("AGENT_DATA_DIR does not win over the service: %+v", r)
	}

	// The default directory holds data too: the service's is read, and
	// both are said.
	must(t, os.MkdirAll(filepath.Join(stateHome, "agent"), 0o700))
	r = runAgentEnv(t, env, "tasks", "ls")
	if !strings.Contains(r.stdout, "t-one") || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, "reading "+one+", the data directory of "+unit) || !strings.Contains(r.stderr, filepath.Join(stateHome, "agent")+" (the default") {
		t.Errorf("tasks ls beside a default directory: want the service's, said in one line with the default: %+v", r)
	}
	must(t, os.Remove(filepath.Join(stateHome, "agent")))

	// A second agent, named: the unnamed one is read, the other said.
	install(two, "--name", "b")
	r = runAgentEnv(t, env, "tasks", "ls")
	if !strings.Contains(r.stdout, "t-one") || !strings.Contains(r.stderr, two+" (agent-b.service)") {
		t.Errorf("tasks ls with two services: want agent.service's, and agent-b's said: %+v", r)
	}
	if r := runAgentEnv(t, env, "tasks", "ls", "--data-dir", two); !strings.Contains(r.stdout, "t-two") || r.stderr != "" {
		t.Errorf("tasks ls --data-dir: %+v", r)
	}
	ctl.took(t)
}
