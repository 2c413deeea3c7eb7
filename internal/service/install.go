package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/natefinch/atomic"
)

// Render is the service file for the target's manager.
func (s Spec) Render() string {
	if s.Manager == Launchd {
		return s.LaunchdPlist()
	}
	return s.SystemdUnit()
}

// BinPath is where the service's binary goes by default: a copy out of
// the clone or the download directory, so that a rebuild or a git clean
// there leaves the service alone, and upgrading is installing again.
func (t Target) BinPath() (string, error) {
	if t.System {
		return "/usr/local/bin/agent", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "bin", "agent"), nil
}

// Place sets where the spec's binary goes: bin (--bin; a directory takes
// agent below it), else BinPath; noCopy (--no-copy) runs Source where it
// is.
func (s *Spec) Place(bin string, noCopy bool) error {
	switch {
	case noCopy && bin != "":
		return usagef("--bin and --no-copy: give one")
	case noCopy:
		return nil
	case bin != "":
		p, err := AbsolutePath("bin", bin)
		if err != nil {
			return err
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, "agent")
		}
		s.Binary = p
		return nil
	}
	p, err := s.BinPath()
	s.Binary = p
	return err
}

// CopyBinary puts Source where the service runs Binary, whole or not at
// all: a new file renamed over the old, so that a running service keeps
// the binary it started from until it restarts.
func (s Spec) CopyBinary() error {
	if s.Binary == s.Source {
		return nil
	}
	src, err := os.Open(s.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(s.Binary), 0o755); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("copy the agent binary to %s: %w", s.Binary, err) }
	tmp, err := os.CreateTemp(filepath.Dir(s.Binary), ".agent-*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is none
	// Whole and executable before it takes the name: a service starting
	// then finds the binary runnable.
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), s.Binary); err != nil {
		return fail(err)
	}
	return nil
}

// Install writes the service's files and loads and starts it, saying each
// step on w and warnings on errw. noStart writes the files and prints the
// commands that would load and start it; dryRun writes nothing and prints
// the file and the commands. What is written is undone if the install
// cannot finish.
func Install(ctx context.Context, w, errw io.Writer, spec Spec, noStart, dryRun bool) error {
	path, text := spec.File(), spec.Render()
	_, err := os.Stat(path)
	steps := spec.installSteps(err == nil)
	if dryRun {
		if spec.Binary != spec.Source {
			fmt.Fprintf(w, "would copy %s to %s\n", spec.Source, spec.Binary)
		}
		fmt.Fprintf(w, "would write %s:\n%s", path, text)
		if spec.Manager == Systemd {
			fmt.Fprintf(w, "would create %s (0600) if missing\n", spec.EnvFile())
		}
		fmt.Fprintf(w, "would create the data directory %s (0700) if missing\nwould run:\n", spec.DataDir)
		printSteps(w, steps)
		return nil
	}
	var u installUndo
	var keep []func()
	defer func() {
		for _, drop := range keep {
			drop()
		}
	}()
	fail := func(err error) error {
		u.undo(errw)
		return err
	}
	if err := spec.makeDirs(&u); err != nil {
		return fail(err)
	}
	if spec.Manager == Systemd {
		created, err := ensureEnvFile(spec.EnvFile())
		if err != nil {
			return fail(err)
		}
		if created {
			u.made(spec.EnvFile())
			fmt.Fprintf(w, "created %s (0600): secrets such as AGENT_TOKEN or ANTHROPIC_API_KEY go there\n", spec.EnvFile())
		} else if st, err := os.Stat(spec.EnvFile()); err == nil && st.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(errw, "agent: warning: %s is readable by others (%#o); it holds secrets: chmod 600 it\n", spec.EnvFile(), st.Mode().Perm())
		}
	}
	if spec.Binary != spec.Source {
		drop, err := u.replacing(spec.Binary)
		if err != nil {
			return fail(err)
		}
		keep = append(keep, drop)
	}
	if err := spec.CopyBinary(); err != nil {
		return fail(err)
	}
	if spec.Binary != spec.Source {
		fmt.Fprintf(w, "copied %s to %s: the service runs that copy; install again to upgrade it\n", spec.Source, spec.Binary)
	} else {
		fmt.Fprintf(w, "the service runs %s where it is: rebuilding or moving it changes or breaks the service\n", spec.Binary)
	}
	drop, err := u.replacing(path)
	if err != nil {
		return fail(err)
	}
	keep = append(keep, drop)
	if err := writeServiceFile(path, text); err != nil {
		return fail(err)
	}
	fmt.Fprintf(w, "wrote %s\n", path)
	if noStart {
		fmt.Fprintln(w, "load and start it with:")
		printSteps(w, steps)
		return nil
	}
	if err := runSteps(ctx, w, steps); err != nil {
		// The manager may have read the new file: put the old one back and
		// tell it so, best effort.
		u.undo(errw)
		if spec.Manager == Systemd {
			_, _ = runCtl(ctx, spec.systemctl("daemon-reload"))
		}
		return err
	}
	printWhere(w, spec.Target, spec.DataDir)
	return nil
}

// printWhere says where the service's data and logs are.
func printWhere(w io.Writer, t Target, dataDir string) {
	fmt.Fprintf(w, "data directory: %s\nlogs: %s\nstate: agent service status%s\n", dataDir, t.LogsHint(), t.FlagsHint())
}

// makeDirs creates the data and work directories (0700, owned by the
// service's account) so that the sandbox can name them writable, and
// launchd's log directory. systemd makes its StateDirectory itself.
func (s Spec) makeDirs(u *installUndo) error {
	dirs := []string{s.WorkDir}
	if !(s.Manager == Systemd && s.System && s.DataDir == filepath.Join("/var/lib", s.stateDirectory())) {
		dirs = append(dirs, s.DataDir)
	}
	if s.Manager == Launchd {
		dirs = append(dirs, filepath.Dir(s.LogFile()))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); err == nil {
			continue
		}
		var made []string // from the top: undone from the deepest
		for p := d; ; p = filepath.Dir(p) {
			if _, err := os.Stat(p); err == nil || filepath.Dir(p) == p {
				break
			}
			made = append([]string{p}, made...)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		for _, p := range made {
			u.made(p)
		}
		if uid, gid := s.ids(); s.System && uid != os.Geteuid() {
			if err := os.Chown(d, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeServiceFile replaces the unit or plist atomically. 0644 is what
// units are: the service manager and `systemctl cat` read them, and they
// hold no secret (the token is in the token file or the 0600 environment
// file).
func writeServiceFile(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomic.WriteFile(path, strings.NewReader(text)); err != nil {
		return err
	}
	return os.Chmod(path, 0o644) // atomic makes it 0600
}

// Uninstall stops, disables and removes the service, saying each step on
// w; the data directory and the environment file are kept. dryRun prints
// the commands instead. A service that is not installed is said so, not
// an error.
func Uninstall(ctx context.Context, w io.Writer, t Target, dryRun bool) error {
	inst, err := ReadInstalled(t)
	if errors.Is(err, iofs.ErrNotExist) {
		fmt.Fprintf(w, "not installed: there is no %s\n", t.File())
		return nil
	}
	if err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintln(w, "would run:")
		printSteps(w, t.unloadSteps())
		fmt.Fprintf(w, "would remove %s\nwould run:\n", t.File())
		printSteps(w, t.forgetSteps())
		return nil
	}
	if err := t.CanRunCtl(); err != nil {
		return err
	}
	if err := runSteps(ctx, w, t.unloadSteps()); err != nil {
		return err
	}
	if err := os.Remove(t.File()); err != nil {
		return err
	}
	fmt.Fprintf(w, "removed %s\n", t.File())
	if err := runSteps(ctx, w, t.forgetSteps()); err != nil {
		return err
	}
	if inst.DataDir != "" {
		fmt.Fprintf(w, "kept the data directory %s (its tasks, logs and any records not yet delivered)\n", inst.DataDir)
	}
	if _, err := os.Stat(t.EnvFile()); t.Manager == Systemd && err == nil {
		fmt.Fprintf(w, "kept %s (it may hold secrets)\n", t.EnvFile())
	}
	return nil
}

// Notices are what install and print say of the spec on stderr, a line
// each: a warning for each path the service needs that its sandbox hides,
// a note for each it opens beyond the home directory (Unreachable).
func (s Spec) Notices() []string {
	hidden, opened := s.Unreachable()
	var lines []string
	for _, l := range hidden {
		lines = append(lines, "agent: warning: "+l)
	}
	for _, l := range opened {
		lines = append(lines, "agent: note: "+l)
	}
	return lines
}
