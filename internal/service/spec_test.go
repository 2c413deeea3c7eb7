package service

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The environment file is read as systemd reads it, and made 0600 in a
// 0700 directory when missing, never over one that is there.
func TestEnvFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent", "agent.env")
	if env, err := ReadEnvFile(path); err != nil || len(env) != 0 {
		t.Errorf("a missing file: %v %v", env, err)
	}
	created, err := ensureEnvFile(path)
	must(t, err)
	st, err := os.Stat(path)
	must(t, err)
	dst, err := os.Stat(filepath.Dir(path))
	must(t, err)
	if !created || st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Errorf("created %v, file %v, directory %v", created, st.Mode(), dst.Mode())
	}
	must(t, os.WriteFile(path, []byte("# comment\n; also\nAGENT_TOKEN=\"quoted value\"\n  AGENT_MAX_CONCURRENT = 3 \nNOEQUALS\nKEY='single'\nEMPTY=\n"), 0o600))
	if created, err := ensureEnvFile(path); created || err != nil {
		t.Errorf("made over an existing file: %v %v", created, err)
	}
	env, err := ReadEnvFile(path)
	must(t, err)
	want := map[string]string{"AGENT_TOKEN": "quoted value", "AGENT_MAX_CONCURRENT": "3", "KEY": "single", "EMPTY": ""}
	if len(env) != len(want) {
		t.Errorf("env %q, want %q", env, want)
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
}

func TestServicePath(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{
		"/usr/bin:bin::/usr/bin:/opt/x\x1b[31m:/bin": "/usr/bin:/bin",
		"":      "/usr/local/bin:/usr/bin:/bin",
		".:rel": "/usr/local/bin:/usr/bin:/bin",
	} {
		if got := ServicePath(shell); got != want {
			t.Errorf("ServicePath(%q) = %q, want %q", shell, got, want)
		}
	}
}

func TestStopTimeout(t *testing.T) {
	t.Parallel()
	// the drain, 3 stop steps of the kill grace, the flush, the offline
	// heartbeat and a margin, in whole seconds
	if got := StopTimeout(30*time.Second, 1500*time.Millisecond); got != 47*time.Second {
		t.Errorf("StopTimeout(30s, 1.5s) = %v, want 47s (30 + 4.5 + 5 + 2 + 5, rounded)", got)
	}
}
