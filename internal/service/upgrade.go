package service

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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
