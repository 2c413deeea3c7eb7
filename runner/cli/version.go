package cli

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
	"github.com/edgeagent/agent/runner"
)

// TestedCLI is a release of an AI CLI the executors are tested against:
// the npm package and version scripts/tools.sh installs for the tests.
type TestedCLI struct{ Package, Version string }

// Tested are the releases the executors are tested against, by executor
// name. Another release may work; its protocol may also have moved.
var Tested = map[string]TestedCLI{
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

// Versioned is an executor whose CLI says its version.
type Versioned interface {
	// VersionCommand is the CLI's binary and the environment an attempt's
	// CLI gets.
	VersionCommand() (bin string, env []string)
}

// Version runs the executor's CLI with --version, in the environment an
// attempt's CLI gets (the allowlist: never the agent's token), and returns
// the binary it ran and the version number it printed ("0.169.0"). ctx
// bounds the run; the CLI's process group is killed when ctx ends. An
// executor that is not Versioned (exec) gives ErrNoVersion.
func Version(ctx context.Context, e runner.Executor) (path, version string, err error) {
	x, ok := e.(Versioned)
	if !ok {
		return "", "", ErrNoVersion
	}
	bin, env := x.VersionCommand()
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
	return runner.Clip(line, 200)
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
