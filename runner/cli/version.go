package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

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
	// OpenCode's npm package is opencode-ai; scripts/tools.sh installs its
	// Linux x64 binary package of the same version.
	"opencode": {Package: "opencode-ai", Version: "1.18.33"},
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
	out, err := Run(ctx, bin, env, 0, "--version")
	text := strings.TrimSpace(out.Stdout + out.Stderr)
	switch {
	case out.Path == "":
		return "", "", err
	case ctx.Err() != nil:
		return out.Path, "", fmt.Errorf("%s --version: no answer: %w", out.Path, ctx.Err())
	case errors.Is(err, ErrExit):
		return out.Path, "", fmt.Errorf("%s --version: exit status %d: %s", out.Path, out.ExitCode, firstLine(text))
	case err != nil:
		return out.Path, "", fmt.Errorf("%w: %s", err, firstLine(text))
	}
	path = out.Path
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
type cappedBuffer struct {
	bytes.Buffer
	limit int // default versionOutputCap
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	limit := b.limit
	if limit <= 0 {
		limit = versionOutputCap
	}
	if room := limit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
