package runnertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// Attempt is one attempt run straight through an executor, without the
// runner's loop: what a test of an executor's session handling needs
// (the runner does not yet continue sessions by itself).
type Attempt struct {
	mu     sync.Mutex
	events []runner.Event
	// Exit is how the executor's Run ended; valid once RunAttempt returned.
	Exit runner.Exit
}

// Events are the events the executor emitted, in order.
func (a *Attempt) Events() []runner.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]runner.Event(nil), a.events...)
}

// Session is the session the attempt bound last and where the CLI keeps
// it ("" for none).
func (a *Attempt) Session() (id, path string) {
	for _, ev := range a.Events() {
		if ev.Type == runner.EventSession {
			id, path = ev.SessionID, ev.SessionPath
		}
	}
	return id, path
}

// Sessions are the distinct sessions the attempt's events named.
func (a *Attempt) Sessions() []string {
	var ids []string
	for _, ev := range a.Events() {
		if ev.SessionID != "" && !strings.Contains(strings.Join(ids, "\n")+"\n", ev.SessionID+"\n") {
			ids = append(ids, ev.SessionID)
		}
	}
	return ids
}

// Result is the attempt's result event, or nil.
func (a *Attempt) Result() *runner.Event { return a.last(runner.EventResult) }

// Error is the attempt's last error event, or nil.
func (a *Attempt) Error() *runner.Event { return a.last(runner.EventError) }

func (a *Attempt) last(typ runner.EventType) *runner.Event {
	evs := a.Events()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return &evs[i]
		}
	}
	return nil
}

// ErrorCode is the code of the attempt's last error event, "" for none.
func (a *Attempt) ErrorCode() state.ErrorCode {
	if e := a.Error(); e != nil {
		return e.Code
	}
	return ""
}

// String says what the attempt emitted, one event a line, for a failure
// message.
func (a *Attempt) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit %+v\n", a.Exit)
	for _, ev := range a.Events() {
		fmt.Fprintf(&b, "%s %s", ev.Type, ev.SessionID)
		for _, s := range []string{ev.SessionPath, string(ev.Phase), string(ev.Code), ev.Message, ev.Text, ev.Summary, strings.Join(ev.Lines, " / ")} {
			if s != "" {
				fmt.Fprintf(&b, " %q", runner.Clip(s, 300))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Owner is an owner of the test's own, for the marks of its attempts:
// parallel tests must not see each other's processes as left behind.
func Owner(t testing.TB) string {
	return fmt.Sprintf("test-%d-%s", os.Getpid(), strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
}

// RunAttempt runs spec through exe, as an attempt of the test's owner
// (spec.Mark, unless set), and returns what it emitted once Run has
// returned. It fails the test if a process of the attempt outlived it.
// onEvent, if set, sees each event as it comes.
func RunAttempt(ctx context.Context, t testing.TB, exe runner.Executor, spec runner.AttemptSpec, onEvent func(runner.Event)) *Attempt {
	t.Helper()
	if spec.AttemptID == "" {
		spec.AttemptID = spec.Task.AttemptID
	}
	if spec.Mark == "" {
		spec.Mark = proc.NewMark(Owner(t), spec.AttemptID)
	}
	a := &Attempt{}
	a.Exit = exe.Run(ctx, spec, func(ev runner.Event) {
		a.mu.Lock()
		a.events = append(a.events, ev)
		a.mu.Unlock()
		if onEvent != nil {
			onEvent(ev)
		}
	})
	AssertNoMarkedProcess(t, Owner(t))
	return a
}

// Confined returns a confinement like the runner's for an attempt whose
// work directory is workDir and temporary directory tempDir: everything
// readable, writable only the two, /dev and Write. Not /tmp: the CLI's
// state directory (in the test's temporary directory) is writable only
// because the executor adds it. It skips the test where the kernel has
// no Landlock.
func Confined(t testing.TB, workDir, tempDir string, write ...string) *landlock.Policy {
	t.Helper()
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	return &landlock.Policy{Read: []string{"/"}, Write: append([]string{"/dev", workDir, tempDir}, write...), ListAll: true}
}

// KillCLI sends SIGKILL to the test's processes that run bin (the CLI,
// not its keeper), as a crash or the OOM killer would, and returns how
// many it found. It may be called from any goroutine.
func KillCLI(t testing.TB, bin string) int {
	t.Helper()
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Errorf("the CLI to kill: %v", err)
		return 0
	}
	n := 0
	for _, pid := range proc.OwnerProcesses(Owner(t)) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && exe == want {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}
