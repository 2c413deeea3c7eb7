package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
)

// ctlCall is one run of systemctl or launchctl (or journalctl, tail): its
// argv.
type ctlCall []string

func (c ctlCall) String() string { return strings.Join(c, " ") }

// ctlStep is a call in a sequence; one that mayFail (unloading a job that
// is not loaded) does not stop the others.
type ctlStep struct {
	call    ctlCall
	mayFail bool
}

// runCtl runs call and returns its output. It is the one way this package
// reaches systemctl and launchctl, found on PATH (so a test can put a fake
// one first). A failure is one line naming the command and saying what
// the tool said.
//
// Callers check CanRunCtl first, before anything is written.
func runCtl(ctx context.Context, call ctlCall) (string, error) {
	cmd := exec.CommandContext(ctx, call[0], call[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if errors.Is(err, exec.ErrNotFound) {
		return "", notOnPath(call)
	}
	if err != nil {
		said := strings.TrimSpace(errb.String())
		if said == "" {
			said = strings.TrimSpace(out.String())
		}
		if said == "" {
			said = err.Error()
		}
		return out.String(), fmt.Errorf("%s: %s", call, oneLine(said))
	}
	return out.String(), nil
}

func notOnPath(call ctlCall) error {
	return fmt.Errorf("%s: %s is not on PATH; is %s this system's service manager? (--no-start prints the commands instead)", call, call[0], strings.TrimSuffix(call[0], "ctl"))
}

// runAttached runs call with its output going to stdout and stderr as it
// comes (journalctl -f, tail -f), until it exits or ctx ends (Ctrl-C).
func runAttached(ctx context.Context, call ctlCall, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, call[0], call[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return fmt.Errorf("%s: %s is not on PATH", call, call[0])
	case ctx.Err() != nil:
		return nil // interrupted: how a follow ends
	case err != nil:
		return fmt.Errorf("%s: %v", call, err)
	}
	return nil
}

// CanRunCtl refuses, before anything is written, a command that would
// need launchctl where there is none.
func (t Target) CanRunCtl() error {
	if t.Manager == Launchd && runtime.GOOS != "darwin" {
		return fmt.Errorf("launchd runs only on macOS; here, use --manager systemd (agent service print --manager launchd shows the plist)")
	}
	return nil
}

// Start starts the installed service, saying the call on w.
func (t Target) Start(ctx context.Context, w io.Writer) error {
	return runSteps(ctx, w, []ctlStep{{call: t.startCall()}})
}

// Stop drains the agent (SIGTERM), saying the call on w; it exits 0, so
// neither manager restarts it.
func (t Target) Stop(ctx context.Context, w io.Writer) error {
	return runSteps(ctx, w, []ctlStep{{call: t.stopCall()}})
}

// Restart stops the agent, which drains (or leaves its attempts to their
// keepers), and starts it again, saying the call on w.
func (t Target) Restart(ctx context.Context, w io.Writer) error {
	return runSteps(ctx, w, []ctlStep{{call: t.restartCall()}})
}

// Logs shows the service's last 100 lines of log on stdout, and with
// follow the ones that come after, until ctx ends.
func (t Target) Logs(ctx context.Context, follow bool, stdout, stderr io.Writer) error {
	return runAttached(ctx, t.logsCall(follow), stdout, stderr)
}

// installSteps load and start the service once its file is written. A
// reinstall restarts a running service so that it takes the new file.
func (t Target) installSteps(reinstall bool) []ctlStep {
	if t.Manager == Launchd {
		steps := []ctlStep{}
		if reinstall {
			steps = append(steps, ctlStep{ctlCall{"launchctl", "bootout", t.launchdService()}, true})
		}
		return append(steps,
			ctlStep{call: ctlCall{"launchctl", "enable", t.launchdService()}},
			ctlStep{call: ctlCall{"launchctl", "bootstrap", t.launchdDomain(), t.File()}})
	}
	steps := []ctlStep{{call: t.systemctl("daemon-reload")}}
	if reinstall {
		steps = append(steps, ctlStep{call: t.systemctl("try-restart", t.Unit())})
	}
	return append(steps, ctlStep{call: t.systemctl("enable", "--now", t.Unit())})
}

// unloadSteps stop and unload the service before its file is removed;
// forgetSteps run after.
func (t Target) unloadSteps() []ctlStep {
	if t.Manager == Launchd {
		return []ctlStep{{ctlCall{"launchctl", "bootout", t.launchdService()}, true}}
	}
	return []ctlStep{{call: t.systemctl("disable", "--now", t.Unit())}}
}

func (t Target) forgetSteps() []ctlStep {
	if t.Manager == Launchd {
		return nil
	}
	return []ctlStep{{call: t.systemctl("daemon-reload")}}
}

func (t Target) startCall() ctlCall {
	if t.Manager == Launchd {
		return ctlCall{"launchctl", "kickstart", t.launchdService()}
	}
	return t.systemctl("start", t.Unit())
}

// restartCall stops the agent, which drains, and starts it again.
func (t Target) restartCall() ctlCall {
	if t.Manager == Launchd {
		return ctlCall{"launchctl", "kickstart", "-k", t.launchdService()}
	}
	return t.systemctl("restart", t.Unit())
}

// logsCall shows the service's last lines of log, and with follow the
// ones that come after: the journal's (systemd), the log file's
// (launchd).
func (t Target) logsCall(follow bool) ctlCall {
	var c ctlCall
	if t.Manager == Launchd {
		c = ctlCall{"tail", "-n", "100"}
	} else {
		c = append(t.systemctl()[1:], "-u", t.Unit(), "-n", "100")
		c = append(ctlCall{"journalctl"}, c...)
	}
	if follow {
		c = append(c, "-f")
	}
	if t.Manager == Launchd {
		c = append(c, t.LogFile())
	}
	return c
}

// stopCall drains the agent (SIGTERM); it exits 0, so neither manager
// restarts it.
func (t Target) stopCall() ctlCall {
	if t.Manager == Launchd {
		return ctlCall{"launchctl", "kill", "SIGTERM", t.launchdService()}
	}
	return t.systemctl("stop", t.Unit())
}

// showCall asks the manager for the service's state.
func (t Target) showCall() ctlCall {
	if t.Manager == Launchd {
		return ctlCall{"launchctl", "print", t.launchdService()}
	}
	return t.systemctl("show", t.Unit(), "--property=LoadState,ActiveState,SubState,MainPID,NRestarts,StatusText")
}

// runSteps runs steps in order, saying each on w; the first failure that
// may not fail ends it.
func runSteps(ctx context.Context, w io.Writer, steps []ctlStep) error {
	for _, s := range steps {
		fmt.Fprintf(w, "running: %s\n", s.call)
		if _, err := runCtl(ctx, s.call); err != nil && !s.mayFail {
			return err
		}
	}
	return nil
}

// printSteps says the commands without running them.
func printSteps(w io.Writer, steps []ctlStep) {
	for _, s := range steps {
		fmt.Fprintf(w, "  %s\n", s.call)
	}
}
