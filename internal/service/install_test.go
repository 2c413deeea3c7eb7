package service

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCtl is a systemctl (or launchctl) first on PATH: a real
// subprocess that records each call's argv, one line per call, and
// fails, saying what its fail file holds, while there is one.
type fakeCtl struct {
	dir, calls, fail string
}

func newFakeCtl(t *testing.T, name string) *fakeCtl {
	t.Helper()
	dir := t.TempDir()
	f := &fakeCtl{dir: dir, calls: filepath.Join(dir, "calls"), fail: filepath.Join(dir, "fail")}
	script := "#!/bin/sh\necho \"$*\" >> '" + f.calls + "'\n" +
		"[ -f '" + f.fail + "' ] && cat '" + f.fail + "' >&2 && exit 1\nexit 0\n"
	must(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700))
	t.Setenv("PATH", dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	return f
}

// took returns the calls made since the last took.
func (f *fakeCtl) took(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(f.calls)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	must(t, err)
	must(t, os.Remove(f.calls))
	return string(b)
}

// installSpec is a user service's spec whose binary is copied from a
// file of the test's to below its home, and whose data directory is not
// there yet.
func installSpec(t *testing.T) Spec {
	t.Helper()
	tg := testTarget(t, Systemd, false)
	spec := testSpec(tg, "--control-plane", "https://cp.example.com")
	top := t.TempDir()
	spec.Source = filepath.Join(top, "build", "agent")
	writeFile(t, spec.Source, "#!/bin/sh\necho agent 1.0\n")
	spec.Binary = filepath.Join(top, "home", ".local", "bin", "agent")
	spec.DataDir = filepath.Join(top, "state", "agent")
	spec.Args = []string{"--control-plane", "https://cp.example.com", "--data-dir", spec.DataDir}
	return spec
}

// gone fails the test for each path that is there.
func gone(t *testing.T, what string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left %s (%v)", what, p, err)
		}
	}
}

// Install writes the binary, the unit, the environment file (0600) and
// the data directory (0700), then loads and starts the unit; installed
// again it restarts it; Uninstall stops and removes it and keeps the
// data and the environment file.
func TestInstallAndUninstall(t *testing.T) {
	ctl := newFakeCtl(t, "systemctl")
	spec := installSpec(t)
	ctx := context.Background()
	var out, errw bytes.Buffer
	must(t, Install(ctx, &out, &errw, spec, false, false))
	if got, want := ctl.took(t), "--user daemon-reload\n--user enable --now agent.service\n"; got != want {
		t.Errorf("install: calls\n%s\nwant\n%s", got, want)
	}
	for path, mode := range map[string]os.FileMode{spec.Binary: 0o755, spec.File(): 0o644, spec.EnvFile(): 0o600, spec.DataDir: 0o700 | os.ModeDir} {
		if st, err := os.Stat(path); err != nil || st.Mode() != mode {
			t.Errorf("%s: %v, want mode %v", path, err, mode)
		}
	}
	if unit, err := os.ReadFile(spec.File()); err != nil || string(unit) != spec.SystemdUnit() {
		t.Errorf("the unit written is not the one rendered: %v", err)
	}
	if env, err := os.ReadFile(spec.EnvFile()); err != nil || string(env) != envFileHeader {
		t.Errorf("the environment file: %v %q", err, env)
	}
	for _, want := range []string{"copied " + spec.Source + " to " + spec.Binary, "wrote " + spec.File(), "data directory: " + spec.DataDir} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("install does not say %q:\n%s", want, out.String())
		}
	}
	if errw.Len() != 0 {
		t.Errorf("install warned: %s", errw.String())
	}

	// Again: the running service takes the new file; an environment file
	// others can read is warned of.
	must(t, os.Chmod(spec.EnvFile(), 0o644))
	out.Reset()
	must(t, Install(ctx, &out, &errw, spec, false, false))
	if got, want := ctl.took(t), "--user daemon-reload\n--user try-restart agent.service\n--user enable --now agent.service\n"; got != want {
		t.Errorf("reinstall: calls\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(errw.String(), spec.EnvFile()+" is readable by others (0644)") {
		t.Errorf("no warning of a readable environment file: %q", errw.String())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(spec.File()), ".agent-install-kept-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	out.Reset()
	must(t, Uninstall(ctx, &out, spec.Target, false))
	if got, want := ctl.took(t), "--user disable --now agent.service\n--user daemon-reload\n"; got != want {
		t.Errorf("uninstall: calls\n%s\nwant\n%s", got, want)
	}
	gone(t, "uninstall", spec.File())
	for _, want := range []string{"removed " + spec.File(), "kept the data directory " + spec.DataDir, "kept " + spec.EnvFile()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("uninstall does not say %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	must(t, Uninstall(ctx, &out, spec.Target, false))
	if out.String() != "not installed: there is no "+spec.File()+"\n" || ctl.took(t) != "" {
		t.Errorf("uninstall of nothing: %q", out.String())
	}
}

// --dry-run writes nothing and runs nothing; --no-start writes and runs
// nothing.
func TestInstallDryRunAndNoStart(t *testing.T) {
	ctl := newFakeCtl(t, "systemctl")
	spec := installSpec(t)
	var out, errw bytes.Buffer
	must(t, Install(context.Background(), &out, &errw, spec, false, true))
	gone(t, "--dry-run", spec.Binary, spec.File(), spec.EnvFile(), spec.DataDir)
	for _, want := range []string{"would copy " + spec.Source, "would write " + spec.File() + ":\n" + spec.SystemdUnit(), "would run:\n  systemctl --user daemon-reload\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--dry-run does not say %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	must(t, Install(context.Background(), &out, &errw, spec, true, false))
	if _, err := os.Stat(spec.File()); err != nil || !strings.Contains(out.String(), "load and start it with:\n  systemctl --user daemon-reload\n") {
		t.Errorf("--no-start: %v\n%s", err, out.String())
	}
	if calls := ctl.took(t); calls != "" {
		t.Errorf("--dry-run and --no-start ran %q", calls)
	}
}

// An install the service manager refuses (no user manager, say) is
// undone: a first install leaves no unit, environment file, binary or
// directory it made; a reinstall puts the unit and binary it replaced
// back.
func TestInstallUndoneWhenItCannotFinish(t *testing.T) {
	ctl := newFakeCtl(t, "systemctl")
	spec := installSpec(t)
	ctx := context.Background()
	must(t, os.WriteFile(ctl.fail, []byte("Failed to connect to bus: No medium found\n"), 0o600))
	var out, errw bytes.Buffer
	err := Install(ctx, &out, &errw, spec, false, false)
	if err == nil || err.Error() != "systemctl --user daemon-reload: Failed to connect to bus: No medium found" {
		t.Fatalf("install without a user manager: %v", err)
	}
	gone(t, "a failed install", spec.File(), spec.EnvFile(), spec.Binary, spec.DataDir, filepath.Dir(spec.DataDir))
	if !strings.Contains(errw.String(), "agent: install undone: removed "+spec.File()) {
		t.Errorf("the undo is not said:\n%s", errw.String())
	}
	// The manager is told the unit is gone.
	if got := ctl.took(t); got != "--user daemon-reload\n--user daemon-reload\n" {
		t.Errorf("calls %q", got)
	}

	must(t, os.Remove(ctl.fail))
	must(t, Install(ctx, &out, &errw, spec, false, false))
	ctl.took(t)
	unitBefore, err := os.ReadFile(spec.File())
	must(t, err)
	binBefore, err := os.ReadFile(spec.Binary)
	must(t, err)
	again := spec
	again.Args = append(again.Args, "--max-concurrent", "3")
	writeFile(t, spec.Source, "#!/bin/sh\necho agent 2.0\n")
	must(t, os.WriteFile(ctl.fail, []byte("Failed to connect to bus\n"), 0o600))
	errw.Reset()
	if err := Install(ctx, &out, &errw, again, false, false); err == nil || !strings.Contains(errw.String(), "install undone: put back "+spec.File()) {
		t.Fatalf("a reinstall that fails: %v\n%s", err, errw.String())
	}
	if unit, err := os.ReadFile(spec.File()); err != nil || string(unit) != string(unitBefore) {
		t.Errorf("the unit after a failed reinstall: %v\n%s", err, unit)
	}
	if bin, err := os.ReadFile(spec.Binary); err != nil || string(bin) != string(binBefore) {
		t.Errorf("the binary after a failed reinstall: %v %q", err, bin)
	}
	if st, err := os.Stat(spec.Binary); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("the binary after a failed reinstall: %v", err)
	}
	for _, dir := range []string{filepath.Dir(spec.Binary), filepath.Dir(spec.File())} {
		if left, _ := filepath.Glob(filepath.Join(dir, ".agent-*")); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
}

// The undo removes what was made, last first (directories when still
// empty), and puts back what was replaced; a file it cannot put back is
// said, and the rest still undone.
func TestInstallUndo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	made, replaced, fresh := filepath.Join(dir, "made"), filepath.Join(dir, "replaced"), filepath.Join(dir, "fresh")
	var u installUndo
	must(t, os.Mkdir(made, 0o700))
	u.made(made)
	writeFile(t, replaced, "old")
	dropReplaced, err := u.replacing(replaced)
	must(t, err)
	defer dropReplaced()
	dropFresh, err := u.replacing(fresh)
	must(t, err)
	defer dropFresh()
	// Install replaces a file by renaming a new one over it, as the kept
	// hard link needs.
	writeFile(t, replaced+".new", "new")
	must(t, os.Rename(replaced+".new", replaced))
	writeFile(t, fresh, "new")
	var w bytes.Buffer
	u.undo(&w)
	if b, err := os.ReadFile(replaced); err != nil || string(b) != "old" {
		t.Errorf("replaced: %q %v, want old", b, err)
	}
	gone(t, "undo", made, fresh, filepath.Join(dir, ".agent-install-kept-replaced"))
	want := "agent: install undone: removed " + fresh + "\nagent: install undone: put back " + replaced + "\nagent: install undone: removed " + made + "\n"
	if w.String() != want {
		t.Errorf("undo said\n%s\nwant\n%s", w.String(), want)
	}

	// A directory that is no longer empty stays, and says so.
	var u2 installUndo
	must(t, os.Mkdir(made, 0o700))
	u2.made(made)
	writeFile(t, filepath.Join(made, "task"), "x")
	w.Reset()
	u2.undo(&w)
	if !strings.HasPrefix(w.String(), "agent: could not undo (removed "+made+"): ") {
		t.Errorf("undo of a directory with a file in it said %q", w.String())
	}
	if _, err := os.Stat(filepath.Join(made, "task")); err != nil {
		t.Errorf("the undo removed what install did not make: %v", err)
	}
}

// --bin names the binary (a directory takes agent below it), --no-copy
// runs it where it is, not both; else it goes below the home directory.
func TestPlace(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	spec := Spec{Target: Target{Manager: Systemd}, Binary: "/src/agent", Source: "/src/agent"}
	for _, c := range []struct {
		bin    string
		noCopy bool
		want   string
	}{
		{"", false, filepath.Join(os.Getenv("HOME"), ".local", "bin", "agent")},
		{dir, false, filepath.Join(dir, "agent")},
		{filepath.Join(dir, "agent-2"), false, filepath.Join(dir, "agent-2")},
		{"~/bin/agent", false, filepath.Join(os.Getenv("HOME"), "bin", "agent")},
		{"", true, "/src/agent"},
	} {
		s := spec
		if err := s.Place(c.bin, c.noCopy); err != nil || s.Binary != c.want {
			t.Errorf("Place(%q, %v): %s %v, want %s", c.bin, c.noCopy, s.Binary, err, c.want)
		}
	}
	system := spec
	system.System = true
	if err := system.Place("", false); err != nil || system.Binary != "/usr/local/bin/agent" {
		t.Errorf("a system service's binary: %s %v", system.Binary, err)
	}
	var ue UsageError
	if err := spec.Place(dir, true); !errors.As(err, &ue) || err.Error() != "--bin and --no-copy: give one" {
		t.Errorf("--bin and --no-copy: %v", err)
	}
}
