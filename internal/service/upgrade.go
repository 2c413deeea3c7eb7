package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeagent/agent/internal/taskview"
)

// UpgradeSource is the new binary of an upgrade: bin (--bin), or the
// running one, symbolic links resolved; it must be an executable file.
func UpgradeSource(bin string) (string, error) {
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("this binary's path: %w; give --bin", err)
		}
		bin = exe
	}
	p, err := AbsolutePath("bin", bin)
	if err != nil {
		return "", err
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return "", fmt.Errorf("--bin %s: no such file", bin)
		}
		return "", fmt.Errorf("--bin %s: %w", bin, err)
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return "", fmt.Errorf("--bin %s: %w", bin, err)
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("--bin %s: not an executable file", bin)
	}
	return p, nil
}

// SameFile reports whether a and b are one file.
func SameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// BinaryVersion runs bin's version command: a file that does not run, or
// is not an agent, is refused before it replaces anything.
func BinaryVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "version")
	b, err := c.Output()
	line := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil || !strings.HasPrefix(line, "agent ") {
		return "", fmt.Errorf("--bin %s does not run as an agent binary (its version command said %q: %v); nothing replaced", bin, oneLine(line), err)
	}
	return line, nil
}

// ReattachOff reports whether agent run's flags turn re-attaching off
// (--reattach-grace 0): a stop then drains the running attempts.
func ReattachOff(args []string) bool {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--reattach-grace=")
		if !ok && a == "--reattach-grace" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok {
			if d, err := time.ParseDuration(v); err == nil && d == 0 || v == "0" {
				return true
			}
		}
	}
	return false
}

// Upgrade puts the binary bin (UpgradeSource's: "" for the running one)
// where the installed service t runs its binary and restarts the service,
// saying on out what it installed and what becomes of each task running
// (running: the tasks a data directory shows running): re-attached by the
// new agent, or drained where the service runs with --reattach-grace 0.
func Upgrade(ctx context.Context, out io.Writer, t Target, bin string, running func(dataDir string) []string) error {
	inst, err := ReadInstalled(t)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(inst.Binary) {
		return fmt.Errorf("%s runs %q, not an absolute path: reinstall the service (agent service install)", t.File(), inst.Binary)
	}
	src, err := UpgradeSource(bin)
	if err != nil {
		return err
	}
	if same, _ := SameFile(src, inst.Binary); same {
		return fmt.Errorf("the service already runs %s; give --bin the new agent binary", inst.Binary)
	}
	version, err := BinaryVersion(ctx, src)
	if err != nil {
		return err
	}
	if err := (Spec{Target: t, Binary: inst.Binary, Source: src}).CopyBinary(); err != nil {
		return err
	}
	fmt.Fprintf(out, "installed %s (%s) as %s\n", src, version, inst.Binary)
	dataDir := inst.DataDir
	if dataDir == "" {
		dataDir = t.DefaultDataDir()
	}
	ids := running(dataDir)
	if ReattachOff(inst.Args) && len(ids) > 0 {
		fmt.Fprintf(out, "the service runs with --reattach-grace 0: the restart drains %d running task(s) and cuts what has not finished\n", len(ids))
	} else {
		for _, id := range ids {
			fmt.Fprintf(out, "task %s goes on through the restart: the new agent re-attaches to it\n", taskview.Visible(id))
		}
	}
	return t.Restart(ctx, out)
}
