// Package demo runs the whole system on embedded defaults, for a person
// to watch: a reference control plane on loopback (started by the caller,
// so that the daemon's packages link no server), an agent running a few
// tasks that show the three outcomes, live progress, then each task's
// attempt timeline and the outbox's figures.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/shellword"
	"github.com/edgeagent/agent/internal/utc"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// Options configure Run.
type Options struct {
	// DataDir keeps the demo's files there; empty uses a temporary
	// directory, removed at the end.
	DataDir string
	// Out receives the narrative.
	Out io.Writer
	// Executor runs the tasks: the sample executor, or a real CLI pointed
	// at a mock model.
	Executor runner.Executor
	// ExecutorKind is what the demo's agent advertises as its executor
	// (sample, codex, claude): routing by capability.
	ExecutorKind string
	// Tasks are the tasks submitted, and Models the fallback chain.
	// Default: the sample executor's tasks and models.
	Tasks   []api.CreateTaskRequest
	Models  []string
	Version string
	// Command is the agent's command as the person invoked it, for the
	// commands the demo suggests at its end (bin/agent from make demo).
	// Default "agent".
	Command string
	// Timeout bounds the whole demo. Default 2 min.
	Timeout time.Duration
	// Subtasks: SelfBin is the agent binary, which the sample executor
	// runs as agent subtask (agent.Config.SelfBin). With it, the demo
	// adds a task that launches two subtasks and waits for them.
	SelfBin string
	// StartControlPlane starts the reference control plane on loopback
	// as cp says and returns its URL and a function that stops it.
	// Required: the daemon's package does not link the server, the
	// command line gives it.
	StartControlPlane func(cp ControlPlane) (url string, stop func(), err error)
}

// ControlPlane is the control plane the demo asks for.
type ControlPlane struct {
	// Dir holds its files, Token is the registration secret agents enrol
	// with and OperatorToken a person's token.
	Dir, Token, OperatorToken string
	// HeartbeatInterval is what it tells agents to use.
	HeartbeatInterval time.Duration
	Logger            *slog.Logger
}

// demoTasks show the outcomes: success; a transient failure before
// anything was done, replayed with the next model; a transient failure
// after a side effect, whose session is continued rather than replayed;
// and a permanent failure after a side effect, which a person continues
// once they have fixed its cause.
var demoTasks = []api.CreateTaskRequest{
	{Title: "Fix the flaky login test", Prompt: "Fix the flaky login test\n@progress 3\n@sleep 1500ms\n@tool go test ./auth/...\n@output Found a race in the session cache; fixed it and added a test."},
	{Title: "Summarize this week's issues", Prompt: "Summarize this week's issues\n@sleep 500ms\n@fail rate_limit\n@progress 3\n@sleep 1s\n@output 12 new issues, 3 need attention."},
	{Title: "Rotate the staging credentials", Prompt: "Rotate the staging credentials\n@progress 2\n@sleep 1s\n@side-effect rotated the staging API key\n@fail network\n@output The new key is in the vault; the old one is revoked."},
	{Title: "Migrate the billing database", Prompt: "Migrate the billing database\n@progress 2\n@sleep 500ms\n@side-effect applied migration 0042 to billing\n@fail quota\n@output Billing is on schema 43."},
}

// subtasksTask launches two subtasks and waits for them: their results
// and timelines come back to it (agent subtask wait).
var subtasksTask = api.CreateTaskRequest{Title: "Prepare the release notes", Prompt: "Prepare the release notes\n" +
	"@subtask Collect the merged changes\\n@progress 2\\n@output 14 changes merged since v1.3\n" +
	"@subtask Check the changelog\\n@sleep 300ms\\n@fail rate_limit\\n@output The changelog is up to date\n" +
	"@wait-subtasks\n@output Release notes drafted from both subtasks."}

// Run runs the whole system on embedded defaults: a reference control
// plane on loopback, an agent with the sample executor, a few tasks, live
// progress, then each task's attempt timeline and the outbox's figures. It
// returns nil once every task is terminal.
func Run(ctx context.Context, opts Options) error {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Command == "" {
		opts.Command = "agent"
	}
	if len(opts.Tasks) == 0 {
		opts.Tasks, opts.Models = demoTasks, []string{"gpt-5-mini", "gpt-5"}
		if opts.SelfBin != "" {
			opts.Tasks = append(slices.Clone(opts.Tasks), subtasksTask)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	out := opts.Out
	dir, keep := opts.DataDir, opts.DataDir != ""
	if !keep {
		var err error
		if dir, err = os.MkdirTemp("", "agent-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "demo.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	log := slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{ReplaceAttr: utc.LogTime}))

	// The split credentials, as agent controlplane serve makes them: the
	// registration secret (every agent host has it) and a person's token.
	cpDir := filepath.Join(dir, "controlplane")
	token, operator := demoToken(), demoToken()
	if err := os.MkdirAll(cpDir, 0o700); err != nil {
		return err
	}
	for name, tok := range map[string]string{"token": token, "operator-token": operator} {
		if err := os.WriteFile(filepath.Join(cpDir, name), []byte(tok+"\n"), 0o600); err != nil {
			return err
		}
	}
	const beat = 500 * time.Millisecond
	if opts.StartControlPlane == nil {
		return errors.New("demo: no control plane to start (Options.StartControlPlane)")
	}
	url, stopCP, err := opts.StartControlPlane(ControlPlane{Dir: cpDir, Token: token, OperatorToken: operator,
		HeartbeatInterval: beat, Logger: log.With("component", "controlplane")})
	if err != nil {
		return err
	}
	defer stopCP()
	client, err := controlplane.NewClient(url, operator, controlplane.ClientOptions{}) // the person's tools
	if err != nil {
		return err
	}
	where := filepath.Join(dir, "agent")
	if !keep {
		where += " (temporary)"
	}
	fmt.Fprintf(out, "Control plane on %s; agent data in %s\n", url, where)
	fmt.Fprintf(out, "Credentials, each in a file of its own (0600) under %s; no token is ever printed:\n"+
		"  a person's   controlplane/operator-token  submits, reads, cancels, retries, answers approvals\n"+
		"  agents'      controlplane/token           registers an agent id nobody holds, nothing else\n"+
		"  the agent's  agent/agent-token            its own, made when it registers: heartbeat, claim, events on its leases\n\n", dir)
	for _, req := range opts.Tasks {
		v, err := client.CreateTask(ctx, req)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		fmt.Fprintf(out, "submitted %s  %s\n", v.ID, v.Title)
	}
	// The tasks reach neither the agent's files nor the control plane's,
	// which share this machine in the demo.
	ag, err := agent.New(agent.Config{ControlPlane: url, Token: token, DataDir: filepath.Join(dir, "agent"), Executor: opts.Executor, ExecutorKind: opts.ExecutorKind,
		Models: opts.Models, MaxConcurrent: 3, HeartbeatInterval: beat, SelfBin: opts.SelfBin, ShutdownGrace: 2 * time.Second,
		Policy: runner.Policy{BaseDelay: time.Second}, Logger: log.With("component", "agent"), Version: opts.Version,
		Isolation: isolation.Config{Protect: []string{cpDir}}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nIsolation: %s\n\n", ag.Isolation())
	agentCtx, stopAgent := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgent()
	agentErr := make(chan error, 1)
	go func() { agentErr <- ag.Run(agentCtx) }()

	w := &watcher{client: client, out: out, agentErr: agentErr, start: time.Now(), last: map[string]string{}}
	views, err := w.watch(ctx)
	if v, ok := toContinue(views); ok && err == nil {
		// A person reads why the task stopped, fixes the cause, and
		// continues its session on the agent that keeps it.
		fmt.Fprintf(out, "\n%s stopped %s: %s\nA person fixes that and continues it (agent tasks continue %s): its session goes on, not the prompt again.\n\n",
			v.ID, v.Phase, v.PhaseReason, v.ID)
		if _, err = client.ContinueTask(ctx, v.ID); err == nil {
			views, err = w.watch(ctx)
		}
	}
	stopAgent()
	if aerr := <-agentErr; err == nil && aerr != nil {
		err = aerr
	}
	if err != nil {
		return err
	}

	fmt.Fprintln(out, "\nAttempt timelines")
	now := time.Now()
	for _, v := range views {
		of := ""
		if v.Parent != "" {
			of = " (a subtask of " + v.Parent + ")"
		}
		fmt.Fprintf(out, "\n  %s  %s: %s%s\n", v.ID, v.Title, v.Phase, of)
		for _, l := range state.Timeline(v.Task(), now) {
			fmt.Fprintf(out, "    %s\n", l)
		}
		// A parent's report of its subtasks, as agent subtask wait gave it.
		if data, ok := resultData(v); ok && data["subtasks"] != nil {
			fmt.Fprintf(out, "    its subtasks, as agent subtask wait reported them:\n")
			for _, l := range strings.Split(fmt.Sprint(data["subtasks"]), "\n") {
				fmt.Fprintf(out, "      %s\n", l)
			}
		}
	}
	snap, err := outbox.Inspect(datadir.Layout{Dir: filepath.Join(dir, "agent")}.Outbox())
	if err != nil {
		return err
	}
	st := snap.Stats
	accepted := 0
	for _, v := range views {
		evs, err := client.TaskEvents(context.WithoutCancel(ctx), v.ID)
		if err != nil {
			return err
		}
		accepted += len(evs)
	}
	fmt.Fprintf(out, "\nOutbox: %d records written, %d sent, %d pending, %d dead; file %d bytes\n",
		st.NextSeq-1, st.Sent, st.Pending, st.Dead, st.FileBytes)
	fmt.Fprintf(out, "Control plane: %d events accepted, each once\n", accepted)
	if keep {
		fmt.Fprintf(out, "\nThe data is kept. Try:\n  %[3]s tasks ls --data-dir %[1]s\n  %[3]s tasks show %[2]s --data-dir %[1]s\n  %[3]s outbox ls --data-dir %[1]s\n",
			shellword.Quote(filepath.Join(dir, "agent")), views[1].ID, opts.Command)
	}
	return nil
}

// resultData is a task's result data when it is a JSON object.
func resultData(v api.TaskView) (map[string]any, bool) {
	if v.Result == nil {
		return nil, false
	}
	data, ok := v.Result.Data.(map[string]any)
	return data, ok
}

// demoToken is a fresh 256-bit token.
func demoToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// toContinue is the task a person continues in the demo: the first that
// a permanent failure stopped after its session had begun.
func toContinue(views []api.TaskView) (api.TaskView, bool) {
	for _, v := range views {
		if v.Phase == state.PhaseFailed && v.Task().SessionAttempt() != nil {
			return v, true
		}
	}
	return api.TaskView{}, false
}

// watcher prints a line whenever a task's phase, progress or attempts
// change.
type watcher struct {
	client   *controlplane.Client
	out      io.Writer
	agentErr <-chan error
	start    time.Time
	last     map[string]string // by task, the line printed last
}

// watch prints the tasks' changes until every task is terminal.
func (w *watcher) watch(ctx context.Context) ([]api.TaskView, error) {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		views, err := w.client.Tasks(ctx)
		if err != nil {
			return nil, err
		}
		done := true
		for _, v := range views {
			done = done && v.Phase.Terminal()
			line := progressLine(v)
			if line != w.last[v.ID] {
				w.last[v.ID] = line
				fmt.Fprintf(w.out, "%6.1fs  %s  %-30s  %s\n", time.Since(w.start).Seconds(), v.ID, state.Ellipsize(v.Title, 30), line)
			}
		}
		if done && len(views) > 0 {
			return views, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the demo did not finish in time: %w", ctx.Err())
		case err := <-w.agentErr:
			if err == nil {
				err = errors.New("the agent stopped early")
			}
			return nil, err
		case <-tick.C:
		}
	}
}

// progressLine is what the demo shows of a task.
func progressLine(v api.TaskView) string {
	s := fmt.Sprintf("%-19s", v.Phase)
	c := v.Task().Current()
	switch {
	case v.Phase.Terminal() && v.PhaseReason != "":
		s += v.PhaseReason
	case v.Phase.Terminal() && v.Result != nil && v.Result.Summary != "":
		s += v.Result.Summary // not the last progress, which is over
	case v.Phase.Terminal():
	case c != nil && c.Status == state.AttemptPending && c.Continues > 0:
		s += fmt.Sprintf("attempt %d continues attempt %d's session after %s", c.Number, c.Continues, v.LastErrorCode)
	case c != nil && c.Status == state.AttemptPending:
		s += fmt.Sprintf("attempt %d with %s after %s", c.Number, c.Model, v.LastErrorCode)
	case v.Progress.Message != "" && v.Progress.Percent > 0:
		s += fmt.Sprintf("%3d%%  %s", v.Progress.Percent, v.Progress.Message)
	case v.Progress.Message != "":
		s += v.Progress.Message
	case c != nil:
		s += fmt.Sprintf("attempt %d with %s", c.Number, c.Model)
	}
	return strings.TrimSpace(s)
}
