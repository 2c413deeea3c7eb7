// Package tmuxview shows the agent's running attempts in tmux: a session
// of the agent's, on a tmux server of its own socket (tmux -L), holds a
// home window (agent tasks watch) and one window per running attempt,
// titled with the task's title and the attempt's number ("fix flaky test
// #2"), running the command that prints the attempt's output as it comes
// (agent tasks logs -f --attempt N). That command ends with its attempt;
// the window stays a short while (Options.Linger), then closes itself. The
// next attempt opens a window of its own.
//
// The view never fails nor slows a task: Open only queues; one goroutine
// runs the tmux commands, each under a timeout. A missing tmux binary, a
// session a person killed (it is made again), a failing command: the first
// is logged, once, and the agent goes on. Titles and task ids are passed to
// tmux as arguments, never through a shell; control characters are taken
// out of window names, and a '#' is escaped so tmux shows it as it is.
//
// Close kills the session when the view made it, else the windows it
// opened: nothing of the view outlives the agent.
package tmuxview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/edgeagent/agent/internal/proc"
)

// Options configures a View.
type Options struct {
	// Socket names the tmux server's socket (tmux -L): a server of the
	// agent's own, so that the view never disturbs a person's. Default
	// DefaultSocket.
	Socket string
	// Session names the session. Default DefaultSession.
	Session string
	// Owner tags the session as this agent's (its data directory, say): a
	// session with the same tag, left by an agent that crashed, is made
	// afresh at start and killed at Close.
	Owner string
	// Home is the command of the session's first window, which stays
	// while the agent runs (agent tasks watch). Required.
	Home []string
	// Attempt is the command of an attempt's window: it prints the
	// attempt's output and exits when the attempt ends. Required.
	Attempt func(taskID string, attempt int) []string
	// Linger is how long an attempt's window stays once its command has
	// exited. Zero is DefaultLinger; under a second (negative), none.
	Linger time.Duration
	// Timeout bounds each tmux command. Default DefaultTimeout.
	Timeout time.Duration
	// Bin is the tmux binary: a path, or a name looked up on PATH.
	// Default "tmux".
	Bin    string
	Logger *slog.Logger
}

// Defaults of the options.
const (
	DefaultSocket  = "agent"
	DefaultSession = "agent"
	DefaultLinger  = 10 * time.Second
	DefaultTimeout = 5 * time.Second
)

// queueLen bounds the windows waiting to be opened; past it an attempt
// gets no window (the tmux server is stuck: its commands time out).
const queueLen = 64

// maxTitle bounds the title in a window's name, in characters.
const maxTitle = 40

// ownerOption is the session option that holds Options.Owner.
const ownerOption = "@agent-owner"

// View is the tmux view of an agent's attempts. A nil View does nothing.
type View struct {
	opts Options
	bin  string
	log  *slog.Logger
	env  []string

	mu     sync.Mutex
	closed bool
	opened map[string]int // task → the last attempt given a window
	reqs   chan request
	done   chan struct{}

	warned atomic.Bool // a failure was logged
	remade atomic.Bool // a session made again was logged

	// The worker's alone.
	made    bool            // the view made the session: Close kills it
	server  bool            // the view started the server: Close kills it, and whatever else runs there
	windows map[string]bool // the windows opened, by id
}

type request struct {
	task, title string
	attempt     int
}

// Start starts the view: it makes the session in the background. Without
// the tmux binary it logs one line and returns a View that does nothing.
func Start(o Options) *View {
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if o.Session == "" {
		o.Session = DefaultSession
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Bin == "" {
		o.Bin = "tmux"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	v := &View{opts: o, log: o.Logger, opened: map[string]int{}, windows: map[string]bool{}}
	bin, err := exec.LookPath(o.Bin)
	if err != nil {
		v.log.Warn("tmux view off: no tmux binary; tasks run without it", "tmux", o.Bin)
		return nil
	}
	if len(o.Home) == 0 || o.Attempt == nil {
		v.log.Warn("tmux view off: no command to show")
		return nil
	}
	v.bin, v.env = bin, tmuxEnv(os.Environ())
	v.reqs, v.done = make(chan request, queueLen), make(chan struct{})
	go v.run()
	// A warning, at every start: the server runs unconfined, and a task
	// can reach it through its socket (docs/tmux.md).
	v.log.Warn("tmux view on: attach with tmux -L "+o.Socket+" attach -t "+o.Session+
		"; a task can reach this tmux server through its socket and run commands there, outside its confinement: use it with tasks you trust",
		"socket", o.Socket, "session", o.Session)
	return v
}

// Open queues a window for a task's attempt, unless the attempt has one.
// It never blocks.
func (v *View) Open(taskID, title string, attempt int) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || v.opened[taskID] >= attempt {
		return
	}
	v.opened[taskID] = attempt
	select {
	case v.reqs <- request{task: taskID, title: title, attempt: attempt}:
	default:
		v.fail(errors.New("too many windows waiting to open; an attempt goes without one"))
	}
}

// Forget forgets a task that ended: if it runs again (a person's retry),
// its attempts get windows again.
func (v *View) Forget(taskID string) {
	if v == nil {
		return
	}
	v.mu.Lock()
	delete(v.opened, taskID)
	v.mu.Unlock()
}

// Close ends the view: the windows waiting are not opened, and the session
// is killed if the view made it, else the windows it opened.
func (v *View) Close() {
	if v == nil {
		return
	}
	v.mu.Lock()
	if !v.closed {
		v.closed = true
		close(v.reqs)
	}
	v.mu.Unlock()
	<-v.done
}

func (v *View) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}

// run is the worker: it makes the session, opens the windows asked for,
// and cleans up when the view closes.
func (v *View) run() {
	defer close(v.done)
	if err := v.ensureSession(); err != nil {
		v.fail(err)
	}
	for r := range v.reqs {
		if v.isClosed() {
			continue
		}
		if err := v.open(r); err != nil {
			v.fail(err)
		}
	}
	v.cleanup()
}

// fail logs the view's first failure; the later ones only at debug level.
func (v *View) fail(err error) {
	if v.warned.CompareAndSwap(false, true) {
		v.log.Warn("tmux view: "+err.Error()+"; tasks run on (said once)", "socket", v.opts.Socket, "session", v.opts.Session)
		return
	}
	v.log.Debug("tmux view: "+err.Error(), "socket", v.opts.Socket, "session", v.opts.Session)
}

// open opens an attempt's window, making the session again if a person
// killed it.
func (v *View) open(r request) error {
	argv := append([]string{"new-window", "-d", "-P", "-F", "#{window_id}", "-t", v.target() + ":", "-n", WindowName(r.title, r.task, r.attempt), "--"},
		v.wrap(v.opts.Attempt(r.task, r.attempt))...)
	out, err := v.tmux(argv...)
	if err != nil {
		if v.hasSession() {
			return err
		}
		if v.remade.CompareAndSwap(false, true) {
			v.log.Info("tmux view: the session was gone; making it again (said once)", "session", v.opts.Session)
		}
		if err := v.ensureSession(); err != nil {
			return err
		}
		if out, err = v.tmux(argv...); err != nil {
			return err
		}
	}
	if id := strings.TrimSpace(out); id != "" {
		v.windows[id] = true
	}
	return nil
}

// wrap runs an attempt's command, then keeps its window for the linger.
// The script is constant: the command's arguments (a task's id) reach it
// as its own arguments, never as shell text.
func (v *View) wrap(cmd []string) []string {
	secs := int(v.opts.Linger / time.Second)
	if secs <= 0 {
		return cmd
	}
	script := fmt.Sprintf(`"$@"; printf '\n-- this window closes in %ds\n'; sleep %d`, secs, secs)
	return append([]string{"/bin/sh", "-c", script, "agent-tmux-view"}, cmd...)
}

// target names the session exactly (not as a prefix).
func (v *View) target() string { return "=" + v.opts.Session }

func (v *View) hasSession() bool {
	_, err := v.tmux("has-session", "-t", v.target())
	return err == nil
}

// ensureSession makes the session unless it exists. One an earlier run of
// the same owner left is made afresh.
func (v *View) ensureSession() error {
	if v.hasSession() {
		if v.opts.Owner == "" {
			return nil
		}
		owner, err := v.tmux("show-options", "-v", "-q", "-t", v.target()+":", ownerOption)
		if err != nil || strings.TrimSpace(owner) != v.opts.Owner {
			return nil // a person's, or another agent's: windows are added to it
		}
		v.log.Info("tmux view: ending the session an earlier run of the agent left", "session", v.opts.Session)
		if _, err := v.tmux("kill-session", "-t", v.target()); err != nil {
			return err
		}
	}
	// No server answers: the one new-session starts is the view's. A
	// task can reach it through its socket (docs/tmux.md), so Close ends
	// it whole, with any session planted there.
	_, lsErr := v.tmux("list-sessions")
	args := append([]string{"new-session", "-d", "-s", v.opts.Session, "-n", "tasks", "--"}, v.opts.Home...)
	// Tried twice: a server whose last session just ended exits, and a
	// command may reach it on its way out.
	_, err := v.tmux(args...)
	if err != nil && !v.hasSession() {
		_, err = v.tmux(args...)
	}
	if err != nil {
		if v.hasSession() { // made meanwhile, by someone else
			return nil
		}
		return err
	}
	v.made = true
	v.server = v.server || lsErr != nil
	// The server is a daemon: under a subreaper agent it becomes the
	// agent's child, which a sweep must not take for an attempt's orphan.
	if out, err := v.tmux("display-message", "-p", "-t", v.target()+":", "#{pid}"); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(out)); err == nil {
			proc.Spare(pid)
		}
	}
	if v.opts.Owner != "" {
		if _, err := v.tmux("set-option", "-t", v.target()+":", ownerOption, v.opts.Owner); err != nil {
			return err
		}
	}
	return nil
}

// cleanup kills the server if the view started it, else the session if
// the view made it, else its windows.
func (v *View) cleanup() {
	if v.server {
		if _, err := v.tmux("kill-server"); err != nil && v.hasSession() {
			v.log.Warn("tmux view: the server was not killed", "socket", v.opts.Socket, "err", err)
		}
		return
	}
	if v.made {
		if v.hasSession() {
			if _, err := v.tmux("kill-session", "-t", v.target()); err != nil {
				v.log.Warn("tmux view: the session was not killed", "session", v.opts.Session, "err", err)
			}
		}
		return
	}
	if len(v.windows) == 0 {
		return
	}
	out, err := v.tmux("list-windows", "-t", v.target(), "-F", "#{window_id}")
	if err != nil {
		return // the session is gone, and its windows with it
	}
	for _, id := range strings.Fields(out) {
		if v.windows[id] {
			_, _ = v.tmux("kill-window", "-t", id)
		}
	}
}

// tmux runs one tmux command on the view's socket and returns its output.
func (v *View) tmux(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), v.opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.bin, append([]string{"-L", v.opts.Socket}, args...)...)
	cmd.Env = v.env
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("tmux %s: no answer within %s", args[0], v.opts.Timeout)
		}
		if msg := firstLine(stderr.String()); msg != "" {
			return "", fmt.Errorf("tmux %s: %s", args[0], msg)
		}
		return "", fmt.Errorf("tmux %s: %w", args[0], err)
	}
	return stdout.String(), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// tmuxEnv is the environment tmux commands run with, and so the server
// the first one starts and its windows: the agent's, but for its token
// and what would tie tmux to another server or to the service manager.
func tmuxEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "TMUX", "TMUX_PANE", "AGENT_TOKEN", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID":
		default:
			out = append(out, kv)
		}
	}
	return out
}

// WindowName is an attempt's window's name: the task's title (its id when
// it has none), without control characters, cut to maxTitle characters,
// and the attempt's number: "fix flaky test #2". A '#' of the title is
// doubled: tmux would read it as the start of a format.
func WindowName(title, taskID string, attempt int) string {
	title = strings.Join(strings.FieldsFunc(title, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) }), " ")
	if title == "" {
		title = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				return -1
			}
			return r
		}, taskID)
	}
	if r := []rune(title); len(r) > maxTitle {
		title = string(r[:maxTitle-1]) + "…"
	}
	return strings.ReplaceAll(title, "#", "##") + " ##" + strconv.Itoa(attempt)
}
