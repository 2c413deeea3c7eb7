package service

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An upgrade's new binary must be an executable file that says it is an
// agent; a link is followed to it.
func TestUpgradeSource(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	must(t, os.WriteFile(agent, []byte("#!/bin/sh\necho 'agent 1.4.0 (abc)'\n"), 0o755))
	link := filepath.Join(dir, "current")
	must(t, os.Symlink(agent, link))
	notExec := filepath.Join(dir, "agent.txt")
	must(t, os.WriteFile(notExec, []byte("x"), 0o644))
	other := filepath.Join(dir, "other")
	must(t, os.WriteFile(other, []byte("#!/bin/sh\necho 'Python 3.12'\n"), 0o755))

	if p, err := UpgradeSource(link); err != nil || p != agent {
		t.Errorf("UpgradeSource(link) = %s %v, want %s", p, err, agent)
	}
	for bin, want := range map[string]string{
		filepath.Join(dir, "gone"): "--bin " + filepath.Join(dir, "gone") + ": no such file",
		notExec:                    "--bin " + notExec + ": not an executable file",
		dir:                        "--bin " + dir + ": not an executable file",
	} {
		if _, err := UpgradeSource(bin); err == nil || err.Error() != want {
			t.Errorf("UpgradeSource(%s): %v, want %q", bin, err, want)
		}
	}
	if same, err := SameFile(link, agent); err != nil || !same {
		t.Errorf("SameFile(link, agent) = %v %v", same, err)
	}
	if same, _ := SameFile(other, agent); same {
		t.Error("SameFile of two files says one")
	}

	if v, err := BinaryVersion(context.Background(), agent); err != nil || v != "agent 1.4.0 (abc)" {
		t.Errorf("BinaryVersion = %q %v", v, err)
	}
	if _, err := BinaryVersion(context.Background(), other); err == nil || !strings.Contains(err.Error(), `does not run as an agent binary (its version command said "Python 3.12"`) {
		t.Errorf("BinaryVersion of another program: %v", err)
	}
}

// Copying the binary replaces it whole: the new one executable, nothing
// left beside it.
func TestCopyBinary(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Source: filepath.Join(dir, "new"), Binary: filepath.Join(dir, "bin", "agent")}
	writeFile(t, spec.Source, "new")
	writeFile(t, spec.Binary, "old")
	must(t, spec.CopyBinary())
	if b, err := os.ReadFile(spec.Binary); err != nil || string(b) != "new" {
		t.Errorf("the binary: %q %v", b, err)
	}
	if st, err := os.Stat(spec.Binary); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("the binary's mode: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "bin", ".agent-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	spec.Source = filepath.Join(dir, "gone")
	if err := spec.CopyBinary(); err == nil {
		t.Error("copied a binary that is not there")
	}
}

// Upgrade checks the new binary, puts it where the unit runs the old one,
// says what becomes of each running task and restarts the service; a
// unit running a relative path, or the binary it already runs, is
// refused with nothing replaced.
func TestUpgrade(t *testing.T) {
	ctl := newFakeCtl(t, "systemctl")
	tg := testTarget(t, Systemd, false)
	dir := t.TempDir()
	old, next := filepath.Join(dir, "agent"), filepath.Join(dir, "agent-new")
	writeFile(t, old, "old")
	must(t, os.WriteFile(next, []byte("#!/bin/sh\necho 'agent v9.9.9 linux/amd64 go1'\n"), 0o700))
	running := func(dataDir string) []string {
		if dataDir != "/srv/agent" {
			t.Errorf("running tasks asked of %s, want the unit's data directory", dataDir)
		}
		return []string{"t-1"}
	}
	for _, c := range []struct{ flags, want string }{
		{"", "task t-1 goes on through the restart: the new agent re-attaches to it\n"},
		{" --reattach-grace 0", "the service runs with --reattach-grace 0: the restart drains 1 running task(s) and cuts what has not finished\n"},
	} {
		writeFile(t, old, "old")
		writeFile(t, tg.File(), "[Service]\nExecStart="+old+" run --data-dir /srv/agent"+c.flags+"\n")
		var out bytes.Buffer
		must(t, Upgrade(context.Background(), &out, tg, next, running))
		want := "installed " + next + " (agent v9.9.9 linux/amd64 go1) as " + old + "\n" + c.want
		if !strings.HasPrefix(out.String(), want) {
			t.Errorf("upgrade said\n%s\nwant it to start\n%s", out.String(), want)
		}
		if b, _ := os.ReadFile(old); !strings.Contains(string(b), "agent v9.9.9") {
			t.Errorf("the service's binary is not the new one: %q", b)
		}
		if got := ctl.took(t); got != "--user restart agent.service\n" {
			t.Errorf("calls %q", got)
		}
	}
	if err := Upgrade(context.Background(), &bytes.Buffer{}, tg, old, running); err == nil || err.Error() != "the service already runs "+old+"; give --bin the new agent binary" {
		t.Errorf("the same binary: %v", err)
	}
	writeFile(t, tg.File(), "[Service]\nExecStart=agent run\n")
	if err := Upgrade(context.Background(), &bytes.Buffer{}, tg, next, running); err == nil || !strings.Contains(err.Error(), `runs "agent", not an absolute path`) {
		t.Errorf("a relative binary: %v", err)
	}
	if got := ctl.took(t); got != "" {
		t.Errorf("a refused upgrade called the manager: %q", got)
	}
}
