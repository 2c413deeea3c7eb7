package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/proc"
)

// TestedCLI is a release of an AI CLI the executors are tested against:
// the npm package and version scripts/tools.sh installs for the tests.
type TestedCLI struct{ Package, Version string }

// TestedCLIs are the releases the executors are tested against, by
// executor name. Another release may work; its protocol may also have
// moved.
var TestedCLIs = map[string]TestedCLI{
	"codex":  {Package: "@openai/codex", Version: "0.169.0"},
	"claude": {Package: "@anthropic-ai/claude-code", Version: "2.1.330"},
}

// ErrNoVersion: the executor runs a command that has no version to ask
// (exec), unlike the AI CLIs.
var ErrNoVersion = errors.New("the executor's command has no version to ask")

// versionWait bounds the wait for output after `CLI --version` has exited
// or been killed (a grandchild may hold the pipe).
const versionWait = time.Second

// versionOutputCap is the most of `CLI --version`'s output kept.
const versionOutputCap = 4 << 10

// semver finds a version number in a CLI's output: "codex-cli 0.169.0",
// "2.1.330 (Claude Code)".
var semver = regexp.MustCompile(`\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?`)

// CLIVersion runs the executor's CLI with --version, in the environment an
// attempt's CLI gets (the allowlist: never the agent's token), and returns
// the binary it ran and the version number it printed ("0.169.0"). ctx
// bounds the run; the CLI's process group is killed when ctx ends. An exec
// executor gives ErrNoVersion.
func CLIVersion(ctx context.Context, e Executor) (path, version string, err error) {
	var bin string
	var env []string
	switch x := e.(type) {
	case *Codex:
		bin, env = x.cfg.Bin, x.env(AttemptSpec{})
	case *Claude:
		bin, env = x.cfg.Bin, x.env(AttemptSpec{})
	default:
		return "", "", ErrNoVersion
	}
	if path, err = proc.Resolve(bin); err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = env
	cmd.SysProcAttr = proc.SysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = versionWait
	var out cappedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	text := strings.TrimSpace(out.String())
	if ctx.Err() != nil {
		return path, "", fmt.Errorf("%s --version: no answer: %w", path, ctx.Err())
	}
	if err != nil {
		return path, "", fmt.Errorf("%s --version: %v: %s", path, err, firstLine(text))
	}
	v := semver.FindString(text)
	if v == "" {
		return path, "", fmt.Errorf("%s --version printed no version number: %q", path, firstLine(text))
	}
	return path, v, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return clip(line, 200)
}

// cappedBuffer keeps the first versionOutputCap bytes written to it and
// drops the rest, so that a CLI that floods cannot fill memory.
type cappedBuffer struct{ bytes.Buffer }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := versionOutputCap - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
