package cli

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
)

// Login is whether a CLI has a credential to call its model with, as told
// without calling the model: by the CLI's own status command or by the
// variables and files it reads. No field ever holds the credential.
type Login struct {
	// OK: a credential is there. Whether the model's API accepts it is
	// told only by a request, which a check does not make.
	OK bool
	// Detail says where the credential is, by name ("logged in with an API
	// key (codex login status)", "ANTHROPIC_API_KEY is set"), or why there
	// is none.
	Detail string
	// Fix, when !OK, is the command or setting that gives the CLI one.
	Fix string
}

// LoginChecker is an executor whose CLI can tell whether it is logged in.
type LoginChecker interface {
	// CheckLogin looks for the credential in the environment an attempt's
	// CLI gets. ctx bounds any command it runs; an error means it could
	// not tell.
	CheckLogin(ctx context.Context) (Login, error)
}

// Output is what a short command of a CLI's printed and how it exited.
type Output struct {
	Path string // the binary run
	// Stdout and Stderr, each cut at Run's limit.
	Stdout, Stderr string
	ExitCode       int
}

// ErrExit: the command ran and exited with a code other than 0; Run
// returns it with the output.
var ErrExit = errors.New("exited non-zero")

// Run runs a short command of a CLI's (bin args...) in env, and returns
// what it printed, each stream cut at limit bytes (0: 4 KiB). ctx bounds it; the command's process group is killed
// when ctx ends. A non-zero exit is ErrExit, with the output.
func Run(ctx context.Context, bin string, env []string, limit int, args ...string) (Output, error) {
	path, err := proc.Resolve(bin)
	if err != nil {
		return Output{}, err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.SysProcAttr = proc.SysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = versionWait
	stdout, stderr := cappedBuffer{limit: limit}, cappedBuffer{limit: limit}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out := Output{Path: path, Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: cmd.ProcessState.ExitCode()}
	command := strings.Join(append([]string{path}, args...), " ")
	if ctx.Err() != nil {
		return out, fmt.Errorf("%s: no answer: %w", command, ctx.Err())
	}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && out.ExitCode > 0 {
		return out, fmt.Errorf("%s: exit %d: %w", command, out.ExitCode, ErrExit)
	}
	if err != nil {
		return out, fmt.Errorf("%s: %w", command, err)
	}
	return out, nil
}

// LastLine is the last line of text that is not a warning, clipped: what a
// CLI's status command concludes.
func LastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "WARNING:") {
			return runner.Clip(l, 200)
		}
	}
	return ""
}

// ModelLister is an executor whose CLI can say, cheaply and without a
// request, which models it knows.
type ModelLister interface {
	// KnownModels lists them; ok is false when the CLI cannot tell (its
	// provider serves what it serves).
	KnownModels(ctx context.Context) (models []string, ok bool, err error)
}

// Handshaker is an executor whose agent says, when started, who it is
// and what it supports (an ACP agent's initialize), without a request to
// the model.
type Handshaker interface {
	// AgentHandshake starts the agent, asks, and ends it: line says who
	// it is and what it does not support; lacks is whether it lacks
	// something the agent would use. ctx bounds it.
	AgentHandshake(ctx context.Context) (line string, lacks bool, err error)
}
