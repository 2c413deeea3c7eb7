package main

import (
	"path/filepath"
	"testing"
)

// A size in the config file is a number of bytes or a string with a unit.
func TestConfigSizes(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "agent.toml")
	writeFile(t, file, "retention-max-size = \"2GiB\"\ntask-log-max-size = 65536\nretention = \"72h\"\n")
	r := runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "config", "print")
	for key, want := range map[string]string{"retention-max-size": `"2GiB"`, "task-log-max-size": `"64KiB"`, "retention": `"72h0m0s"`} {
		if v, _ := printed(t, r.stdout, key); v != want {
			t.Errorf("%s = %s, want %s", key, v, want)
		}
	}
	writeFile(t, file, "task-log-max-size = \"1KiB\"\n")
	wantOneLineError(t, runAgentEnv(t, nil, "config", "check", file), 2, ":1: task-log-max-size = 1KiB: want at least 4KiB")
}
