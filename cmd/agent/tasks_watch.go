package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/state"
)

func newTasksWatchCmd() *cobra.Command {
	var (
		src       sourceFlags
		recent    int
		untilDone bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "A live view of the tasks: running ones with their progress cards, scheduled retries, recent endings with their timelines",
		Long: `watch shows the tasks as they run, until you stop it (q or Ctrl-C): each
running task with its progress card and latest progress, each scheduled
retry with its countdown, queued tasks (--remote only: the queue is the
control plane's, and an agent's data directory holds only the tasks it
claimed), and the tasks that ended last with their attempt timelines.

It reads the agent's data directory (without taking its lock, so it works
while the agent runs), redrawn as the files change; with --remote it polls
the control plane instead. On a terminal it redraws in place; otherwise
(piped, redirected) it prints one line per change, and a task's timeline
when it ends.

With --until-done it ends, exit 0, once no task it sees is running, waiting
out a retry or queued; --timeout bounds that wait: when it passes first the
watch ends with exit 7, and the tasks go on.`,
		Example: `  agent tasks watch
  agent tasks watch --remote --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks watch | tee watch.log
  agent tasks watch --until-done --timeout 30m`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if recent < 0 {
				return usagef("--recent %d: want 0 or more", recent)
			}
			switch {
			case timeout < 0:
				return usagef("--timeout %s: want 0 (no bound) or more", timeout)
			case timeout > 0 && !untilDone:
				return usagef("--timeout bounds --until-done: give both")
			}
			s, err := src.source()
			if err != nil {
				return err
			}
			ctx, cancel := waitOptions{Timeout: timeout}.bound(cmd.Context(), "")
			defer cancel()
			var wake <-chan struct{}
			if !src.remote {
				// A data directory the agent never used (a typo) is an
				// error, not an empty view forever.
				if err := datadir.CheckTaskState(src.dataDir); err != nil {
					return err
				}
				w, err := newDirWatch()
				if err != nil {
					return err
				}
				defer w.Close()
				w.Add(datadir.Layout{Dir: src.dataDir}.Tasks())
				wake = w.Wake()
			}
			out := cmd.OutOrStdout()
			left := 0 // tasks not ended when the watch ended
			if f, ok := out.(*os.File); ok && isTerminal(out) {
				err = watchScreen(ctx, s, wake, f, recent, newHint(&src.cp), untilDone, &left)
			} else {
				err = watchLines(ctx, s, wake, out, cmd.ErrOrStderr(), recent, untilDone, &left)
			}
			if waitErrCode(waitEnded(ctx, err)) == exitWaitTimeout {
				cmd.PrintErrf("agent: tasks watch: --timeout %s passed; %d tasks had not ended (they go on)\n", timeout, left)
				return exitCode(exitWaitTimeout)
			}
			if errors.Is(err, context.Canceled) {
				return nil // stopped by the person
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&untilDone, "until-done", false, "end (exit 0) once no task is running, waiting out a retry or queued")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --until-done, end with exit 7 when the tasks have not all ended within this long (they go on); 0: no bound")
	src.add(cmd)
	cmd.Flags().IntVar(&recent, "recent", 5, "how many of the tasks that ended last to show")
	return cmd
}

// board is what the watch shows at one moment, by section.
type board struct {
	running  []*state.Task // claimed to completing, not waiting out a retry's backoff
	retrying []*state.Task // a retry scheduled: the current attempt waits for its start
	queued   []*state.Task
	ended    []*state.Task // the last to end first, at most the number asked
	endedAll int
	// queueKnown: the source sees the queue (the control plane does; an
	// agent's data directory does not), so the board may count it.
	queueKnown bool
}

// newBoard sorts the tasks into the board's sections.
func newBoard(tasks []*state.Task, recent int) board {
	var b board
	for _, t := range tasks {
		c := t.Current()
		switch {
		case t.Phase.Terminal():
			b.ended = append(b.ended, t)
		case t.Phase == state.PhaseQueued:
			b.queued = append(b.queued, t)
		case c != nil && c.Status == state.AttemptPending:
			b.retrying = append(b.retrying, t)
		default:
			b.running = append(b.running, t)
		}
	}
	slices.SortStableFunc(b.ended, func(x, y *state.Task) int { return y.UpdatedAt.Compare(x.UpdatedAt) })
	b.endedAll = len(b.ended)
	b.ended = b.ended[:min(len(b.ended), recent)]
	return b
}

// unended counts the tasks on the board that have not ended: running,
// waiting out a retry, or queued.
func (b board) unended() int { return len(b.running) + len(b.retrying) + len(b.queued) }

// shown lists the tasks the board shows.
func (b board) shown() []*state.Task {
	return slices.Concat(b.running, b.retrying, b.queued, b.ended)
}

// watchLines prints one line per change of a task, and its timeline when
// it ends: the watch's form for a pipe or a file. The first round prints
// what the board shows; later rounds, every task that changed.
// With untilDone it ends once no task is left unended; left says how
// many were when it ended.
func watchLines(ctx context.Context, s taskSource, wake <-chan struct{}, out, errOut io.Writer, recent int, untilDone bool, left *int) error {
	last := map[string]string{}
	first, warned := true, ""
	seen := newWatchList(s)
	return follow(ctx, wake, func() (bool, error) {
		tasks, err := seen.tasks(ctx)
		if err != nil {
			if tasks == nil && !s.Transient(err) {
				return false, err
			}
			if msg := oneLine(err.Error()); msg != warned {
				warned = msg
				fmt.Fprintf(errOut, "agent: tasks watch: warning: %s\n", visible(msg))
			}
		}
		show := tasks
		if first {
			show = newBoard(tasks, recent).shown()
			for _, t := range tasks {
				last[t.ID] = taskLine(t) // the others count from here
			}
			for _, t := range show {
				last[t.ID] = ""
			}
			first = false
		}
		for _, t := range show {
			line := taskLine(t)
			if last[t.ID] == line {
				continue
			}
			last[t.ID] = line
			fmt.Fprintf(out, "%s  %s  %-30s  %s\n", time.Now().Format(time.TimeOnly), visible(t.ID), visible(state.Ellipsize(t.Title, 30)), visible(line))
			if t.Phase.Terminal() {
				printTimeline(out, t, "    ")
			}
		}
		return doneWatching(tasks, err, untilDone, left), nil
	})
}

// doneWatching reports whether a watch --until-done may end: the tasks
// were read, and none is left unended. left counts those.
func doneWatching(tasks []*state.Task, err error, untilDone bool, left *int) bool {
	if err != nil && tasks == nil {
		return false // not read: nothing is known to have ended
	}
	*left = newBoard(tasks, 0).unended()
	return untilDone && *left == 0
}

// Terminal control sequences of the live view.
const (
	ansiAltScreen     = "\x1b[?1049h" // the alternate screen: what was on the terminal comes back at the end
	ansiMainScreen    = "\x1b[?1049l"
	ansiHideCursor    = "\x1b[?25l"
	ansiShowCursor    = "\x1b[?25h"
	ansiHome          = "\x1b[H"
	ansiClearLine     = "\x1b[K" // to the end of the line
	ansiClearBelow    = "\x1b[J"
	ansiBold, ansiOff = "\x1b[1m", "\x1b[0m"
)

// watchScreen redraws the board in place on a terminal, on the alternate
// screen, until ctx ends or the person presses q (or Ctrl-C). The terminal
// is given back as it was, whatever ends the watch.
func watchScreen(ctx context.Context, s taskSource, wake <-chan struct{}, out *os.File, recent int, h hint, untilDone bool, left *int) error {
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	fmt.Fprint(out, ansiAltScreen+ansiHideCursor)
	final := "" // the board when --until-done ended the watch: it stays on the terminal
	defer func() { fmt.Fprint(out, ansiMainScreen+ansiShowCursor+final) }()
	if isTerminal(os.Stdin) {
		if restore, err := keyMode(os.Stdin); err == nil {
			var keys sync.WaitGroup
			keys.Go(func() { readKeys(ctx, os.Stdin, quit) })
			defer restore()
			defer keys.Wait() // before the terminal is put back
			defer quit()
		}
	}
	prev, problem := "", ""
	seen := newWatchList(s)
	return follow(ctx, wake, func() (bool, error) {
		tasks, err := seen.tasks(ctx)
		switch {
		case err != nil && tasks == nil && !s.Transient(err):
			return false, err
		case err != nil:
			problem = oneLine(err.Error())
		default:
			problem = ""
		}
		if tasks == nil && problem != "" && prev != "" {
			return false, nil // keep what was shown; the header will say why it is old
		}
		width, height := termSize(out)
		b := newBoard(tasks, recent)
		b.queueKnown = s.KnowsQueue()
		lines := renderBoard(b, s.String(), problem, newPalette(out), h, time.Now(), width, height)
		frame := strings.Join(lines, ansiClearLine+"\n") + ansiClearLine
		if frame != prev {
			prev = frame
			fmt.Fprint(out, ansiHome+frame+ansiClearBelow)
		}
		done := doneWatching(tasks, err, untilDone, left)
		if done {
			final = strings.Join(lines, "\n") + "\n"
		}
		return done, nil
	})
}

// readKeys ends the watch (quit) when q, Q or Ctrl-C is read, and returns
// when ctx ends: the terminal's reads return every tenth of a second.
func readKeys(ctx context.Context, in *os.File, quit func()) {
	buf := make([]byte, 16)
	for ctx.Err() == nil {
		n, err := in.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return
		}
		for _, b := range buf[:n] {
			if b == 'q' || b == 'Q' || b == 3 {
				quit()
				return
			}
		}
	}
}

// renderBoard lays the board out for a terminal of width×height: a
// header, then each section. Lines are cut to the width, and the board to
// the height, saying how much did not fit. Text from tasks goes through
// visible.
func renderBoard(b board, where, problem string, p palette, h hint, now time.Time, width, height int) []string {
	var lines []string
	hinted := false // a hint was printed: its placeholders need saying
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	// A command a person may copy is never cut: it goes on the next lines,
	// broken between words with the shell's "\", when it does not fit.
	addCommand := func(head, command string) {
		hinted = true
		lines = append(lines, wrapCommand(head, command, "      ", width)...)
	}
	add("%sagent tasks watch%s  ·  %s  ·  %s  ·  q to quit", ansiBold, ansiOff, visible(where), now.Format(time.TimeOnly))
	if b.queueKnown {
		add("%d running · %d retry scheduled · %d queued · %d ended", len(b.running), len(b.retrying), len(b.queued), b.endedAll)
	} else {
		add("%d running · %d retry scheduled · %d ended · the queue is the control plane's (--remote shows it)", len(b.running), len(b.retrying), b.endedAll)
	}
	if problem != "" {
		add("! %s (showing what was read last)", visible(problem))
	}
	if len(b.shown()) == 0 {
		add("")
		add("no tasks yet")
	}
	head := func(t *state.Task) string {
		return visible(t.ID) + "  " + visible(state.Ellipsize(t.Title, 40))
	}
	if len(b.running) > 0 {
		add("")
		add("%sRunning%s", ansiBold, ansiOff)
		for _, t := range b.running {
			line := "  " + head(t) + "  ·  " + p.phase(t.Phase)
			if c := t.Current(); c != nil {
				line += fmt.Sprintf("  ·  attempt %s with %s  ·  %s", c.NumberText(), visible(dash(c.Model)), state.Compact(now.Sub(c.StartedAt)))
				if c.RetriedByPerson {
					line += "  ·  retried by a person"
				}
			}
			add("%s", line)
			var card []string
			for _, s := range state.ProgressCard(t) {
				card = append(card, p.step(s))
			}
			add("    %s", strings.Join(card, "  "))
			switch {
			case t.AwaitingReply != nil:
				add("    waiting for a person: %s", visible(t.AwaitingReply.What()))
				addCommand("    answer with one of --accept, --decline:", h.tasks("reply", t.ID, "--accept|--decline"))
			case t.Phase == state.PhaseParked && t.Parked != nil && t.Parked.Reason == state.ParkBudget:
				add("    %s", visible(state.ParkedText(t)))
				addCommand("    raise it and continue:", h.tasks("budget", t.ID, "--add-tokens N|--add-time D"))
			case t.Phase == state.PhaseParked:
				add("    %s", visible(state.ParkedText(t)))
				addCommand("    continue it now:", h.tasks("continue", t.ID, ""))
			case t.Progress.Message != "" || t.Progress.Percent > 0:
				add("    %3d%%  %s", t.Progress.Percent, visible(t.Progress.Message))
			}
		}
	}
	if len(b.retrying) > 0 {
		add("")
		add("%sRetry scheduled%s", ansiBold, ansiOff)
		for _, t := range b.retrying {
			c := t.Current()
			after := ""
			if c.Number > 1 {
				if e := t.Attempts[c.Number-2].Error; e != nil {
					after = "  ·  after " + visible(state.Ellipsize(e.Error(), 60))
				}
			}
			add("  %s  ·  attempt %s with %s %s%s", head(t), c.NumberText(), visible(dash(c.Model)), countdown(c.NotBefore.Sub(now)), after)
		}
	}
	if len(b.queued) > 0 {
		add("")
		add("%sQueued%s", ansiBold, ansiOff)
		for _, t := range b.queued {
			add("  %s  ·  queued %s", head(t), ago(now, t.UpdatedAt))
		}
	}
	if len(b.ended) > 0 {
		add("")
		add("%sEnded%s", ansiBold, ansiOff)
		for _, t := range b.ended {
			line := "  " + head(t) + "  ·  " + p.phase(t.Phase) + " " + ago(now, t.UpdatedAt)
			if t.PhaseReason != "" {
				line += "  ·  " + visible(t.PhaseReason)
			}
			add("%s", line)
			for _, l := range p.timeline(t, now) {
				add("    %s", l)
			}
			if t.Phase == state.PhaseRecoverableFailed {
				addCommand("    a person decides:", h.tasks("retry", t.ID, ""))
			}
		}
	}
	if s := h.placeholders(); hinted && s != "" {
		add("")
		add("%s", s)
	}
	for i, l := range lines {
		lines[i] = fitWidth(l, width)
	}
	if len(lines) > height {
		lines = append(lines[:height-1], fmt.Sprintf("… %d more lines (a taller terminal, or --recent 0, shows them)", len(lines)-height+1))
	}
	return lines
}

// ansiSGR matches the board's own styling sequences: bold, colours, off.
var ansiSGR = regexp.MustCompile("\x1b\\[[0-9;]*m")

// wrapCommand is head and command on one line if they fit in width, else
// command broken between words over lines that end in " \\" (so that a
// shell reads them as one), each continuation after indent. A word longer
// than the width stays whole.
func wrapCommand(head, command, indent string, width int) []string {
	if len([]rune(head))+1+len([]rune(command)) <= width {
		return []string{head + " " + command}
	}
	lines := []string{head}
	cur := indent
	for _, w := range strings.Fields(command) {
		if cur != indent && len([]rune(cur))+1+len([]rune(w))+2 > width {
			lines = append(lines, cur+" \\")
			cur = indent + "  "
		}
		if cur != indent && cur != indent+"  " {
			cur += " "
		}
		cur += w
	}
	return append(lines, cur)
}

// countdown says when a retry starts: "in 3s", or "now".
func countdown(d time.Duration) string {
	if d <= 0 {
		return "now"
	}
	return "in " + state.Compact((d + time.Second - 1).Truncate(time.Second)) // 2.3 s is "in 3s"
}

// fitWidth cuts a line to width columns, not counting the bold and colour
// sequences the board uses (everything else in it is visible text, escape
// characters from tasks having gone through visible). A line cut loses its
// colours.
func fitWidth(s string, width int) string {
	plain := ansiSGR.ReplaceAllString(s, "")
	if len([]rune(plain)) <= width {
		return s
	}
	return state.Ellipsize(plain, width)
}

// watchList is what each round of a watch shows. From a data directory,
// every task. From the control plane, the tasks that have not ended and
// those the watch saw end (each asked for once, as it leaves the live
// list): a round costs what is live, not the whole history.
type watchList struct {
	s     taskSource
	live  map[string]bool
	ended map[string]*state.Task
}

func newWatchList(s taskSource) *watchList {
	return &watchList{s: s, live: map[string]bool{}, ended: map[string]*state.Task{}}
}

func (w *watchList) tasks(ctx context.Context) ([]*state.Task, error) {
	if !w.s.KnowsQueue() {
		return w.s.Tasks(ctx, api.TaskFilter{}, 0)
	}
	live, err := w.s.Tasks(ctx, api.TaskFilter{Live: true}, 0)
	if err != nil {
		return nil, err
	}
	now := make(map[string]bool, len(live))
	for _, t := range live {
		now[t.ID] = true
		delete(w.ended, t.ID) // a person's retry brought it back
	}
	for id := range w.live {
		if now[id] {
			continue
		}
		t, err := w.s.Task(ctx, id)
		if err != nil {
			if errors.Is(err, errNoTask) {
				continue // removed meanwhile (retention)
			}
			return nil, err // asked again next round: it is still in w.live
		}
		w.ended[id] = t
	}
	w.live = now
	out := slices.Clone(live)
	for _, t := range w.ended {
		out = append(out, t)
	}
	return out, nil
}
