package runner_test

import (
	"context"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// workspaces is a workspace.Manager as the runner takes it (the agent's
// own adapter does the same).
type workspaces struct{ m *workspace.Manager }

func (w workspaces) Prepare(ctx context.Context, taskID, repo, base string) (runner.Prepared, error) {
	ws, err := w.m.Prepare(ctx, taskID, repo, base)
	if err != nil {
		return runner.Prepared{}, err
	}
	return runner.Prepared{Dir: ws.Dir, Writable: ws.Writable(), Checkout: ws.Checkout}, nil
}

func (w workspaces) Reset(ctx context.Context, taskID string, attempt int) (string, error) {
	return w.m.Reset(ctx, taskID, attempt)
}

func (w workspaces) Commit(ctx context.Context, taskID, message string) (string, error) {
	head, err := w.m.Commit(ctx, taskID, message, workspace.Author{})
	if errors.Is(err, workspace.ErrNoWorkspace) {
		return "", nil
	}
	return head, err
}

func (w workspaces) Diff(ctx context.Context, taskID string) (*state.DiffEvent, error) {
	d, err := w.m.Diff(ctx, taskID)
	if errors.Is(err, workspace.ErrNoWorkspace) {
		return nil, nil
	}
	return d, err
}

func (w workspaces) BringBack(ctx context.Context, taskID string) error {
	if _, err := w.m.BringBack(ctx, taskID); err != nil && !errors.Is(err, workspace.ErrNoWorkspace) {
		return err
	}
	return nil
}

func (w workspaces) Changes(ctx context.Context, taskID string) (*state.Changes, error) {
	return w.m.Changes(ctx, taskID)
}

// repoFixture is a fixture whose task names a real repository the runner
// serves, as repo "site".
func repoFixture(t *testing.T, prompt string) (*runnertest.Fixture, string) {
	t.Helper()
	repo := gittest.NewRepo(t)
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Env: gittest.Env()}), prompt)
	f.Runner.WorkRoot = t.TempDir()
	m, err := workspace.New(f.Runner.WorkRoot, []workspace.Repo{{Name: "site", Path: repo}})
	if err != nil {
		t.Fatal(err)
	}
	f.Runner.Workspaces = workspaces{m}
	f.Task.Repo = "site"
	return f, repo
}

// A task naming a repository runs in a clone of its own, on its own
// branch; what it left uncommitted the agent commits on top of its own
// commits, by the agent, with the task's title and the attempt's
// summary and the task in a trailer; the result says what it changed,
// the diff of its work is reported, and the repository has the branch.
// A task that asks for no commit keeps its work uncommitted.
func TestATaskRunsInItsWorkspaceAndItsWorkIsCommitted(t *testing.T) {
	prompt := "@sh pwd > where.txt && echo hello > hello.txt && git add hello.txt && git commit -q -m 'say hello'"
	f, repo := repoFixture(t, prompt)
	f.Task.Title = "Say hello"
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s); logs:\n%s", f.Task.Phase, f.Task.PhaseReason, strings.Join(f.Rec.Logs(), "\n"))
	}
	dir := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
	if b, _ := os.ReadFile(filepath.Join(dir, "where.txt")); strings.TrimSpace(string(b)) != dir {
		t.Errorf("the executor ran in %q, want the workspace %s", b, dir)
	}
	ch := f.Task.Result.Changes
	if ch == nil || ch.Branch != "agent/"+f.Task.ID || len(ch.Commits) != 2 || ch.Commits[0].Subject != "say hello" || ch.Commits[1].Subject != "Say hello" ||
		ch.Files != 2 || ch.Insertions != 2 || ch.Uncommitted {
		t.Fatalf("changes %+v", ch)
	}
	msg := gittest.Git(t, repo, "log", "-1", "--format=%an <%ae>%n%B", "agent/"+f.Task.ID)
	if want := workspace.DefaultAuthor().String() + "\nSay hello\n\ndone: the task\n\nAgent-Task: t-1\nAgent-Attempt: 1"; msg != want {
		t.Errorf("the agent's commit in the repository:\n%s\nwant:\n%s", msg, want)
	}
	if got := gittest.Git(t, repo, "show", "agent/"+f.Task.ID+":where.txt"); got != dir {
		t.Errorf("where.txt committed as %q", got)
	}
	var diffs []state.DiffEvent
	for _, p := range f.Rec.Payloads() {
		if d, ok := p.(state.DiffEvent); ok {
			diffs = append(diffs, d)
		}
	}
	if len(diffs) != 1 || diffs[0].Files != 2 || diffs[0].Head != ch.Head || !strings.Contains(diffs[0].Patch, "+hello\n") {
		t.Errorf("diff events %+v", diffs)
	}
	if !runnertest.ContainsSub(f.Rec.Logs(), "agent: committed what attempt 1 left on agent/t-1 as "+ch.Head) {
		t.Errorf("the log does not say what the agent committed:\n%s", strings.Join(f.Rec.Logs(), "\n"))
	}
	if _, err := os.Stat(filepath.Join(repo, "hello.txt")); err == nil {
		t.Error("the task's commit reached the main checkout")
	}
	if got := gittest.Git(t, repo, "rev-list", "--count", "main"); got != "1" {
		t.Errorf("main has %s commits, want 1", got)
	}

	nc, _ := repoFixture(t, prompt)
	nc.Task.NoCommit = true
	nc.Run(t, context.Background())
	if ch := nc.Task.Result.Changes; nc.Task.Phase != state.PhaseCompleted || ch == nil || len(ch.Commits) != 1 || !ch.Uncommitted || ch.Files != 2 {
		t.Errorf("a task that asks for no commit: %s, changes %+v", nc.Task.Phase, ch)
	}
}

// A replay starts from the base, and keeps what the attempt before it
// left on a ref of its own, which its attempt names. A continue keeps
// the workspace as the cut attempt left it, its work committed: the
// task's git sees nothing left to commit, and goes on from there.
func TestAReplayKeepsWhatWasLeftAndAContinueGoesOnFromIt(t *testing.T) {
	replay, repo := repoFixture(t, "@fail network\n@sh test ! -e leftover.txt")
	replay.Rec.OnReport = func(r runner.Report) {
		if a, ok := r.Payload.(state.Attempt); ok && a.Number == 1 && a.Status == state.AttemptFailed {
			// What the failed attempt left behind, untracked, after the
			// agent committed what it had.
			os.WriteFile(filepath.Join(replay.Runner.WorkRoot, replay.Task.ID, "leftover.txt"), []byte("x"), 0o600)
		}
	}
	replay.Run(t, context.Background())
	a := replay.Task.Attempts
	if replay.Task.Phase != state.PhaseCompleted || len(a) != 2 || a[0].Retry.Decision != state.DecisionRetried {
		t.Fatalf("replay: task %s, attempts %s; logs:\n%s", replay.Task.Phase, runnertest.AttemptsText(replay.Task), strings.Join(replay.Rec.Logs(), "\n"))
	}
	if a[1].KeptRef != "refs/agent/kept/t-1/attempt-1" || gittest.Git(t, repo, "show", a[1].KeptRef+":leftover.txt") != "x" {
		t.Errorf("the replay's attempt says it kept %q", a[1].KeptRef)
	}
	if !runnertest.ContainsSub(replay.Rec.Logs(), "agent: what attempt 1 left is kept on refs/agent/kept/t-1/attempt-1") {
		t.Errorf("the log does not say what was kept:\n%s", strings.Join(replay.Rec.Logs(), "\n"))
	}

	cont, _ := repoFixture(t, "@sh echo half > half.txt\n@fail network\n"+
		`@sh test -e half.txt && test -z "$(git status --porcelain)" && echo more >> half.txt && git commit -qam 'the other half'`)
	cont.Run(t, context.Background())
	if a := cont.Task.Attempts; cont.Task.Phase != state.PhaseCompleted || len(a) != 2 || a[1].Continues != 1 || a[1].KeptRef != "" {
		t.Fatalf("continue: task %s, attempts %s; logs:\n%s", cont.Task.Phase, runnertest.AttemptsText(cont.Task), strings.Join(cont.Rec.Logs(), "\n"))
	}
	if ch := cont.Task.Result.Changes; ch == nil || len(ch.Commits) != 2 || ch.Commits[1].Subject != "the other half" || ch.Uncommitted {
		t.Errorf("changes %+v", ch)
	}
}

// A person's retry of a task that left work uncommitted (it asked for no
// commit) replays it, and loses nothing: what the attempt left is on
// refs/agent/kept/TASK_ID/attempt-1, which the attempt, the timeline
// and the log name.
func TestARetryAfterUncommittedWorkKeepsIt(t *testing.T) {
	ctx := context.Background()
	f, repo := repoFixture(t, "@sh echo draft > draft.txt\n@no-session\n@fail network\n@output done")
	f.Task.NoCommit = true
	f.Run(t, ctx)
	if f.Task.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("task %s (%s); logs:\n%s", f.Task.Phase, f.Task.PhaseReason, strings.Join(f.Rec.Logs(), "\n"))
	}
	if ch := f.Task.Result.Changes; ch == nil || !ch.Uncommitted || len(ch.Commits) != 0 {
		t.Fatalf("changes after the first attempt: %+v", ch)
	}
	must(t, f.Task.RetryByPerson(time.Now()))
	must(t, f.Task.Transition(state.PhaseClaimed, "claimed by agent-1", time.Now()))
	f.Run(t, ctx)
	a := f.Task.Attempts
	if f.Task.Phase != state.PhaseCompleted || len(a) != 2 || a[1].Continues != 0 {
		t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	const kept = "refs/agent/kept/t-1/attempt-1"
	if a[1].KeptRef != kept {
		t.Fatalf("the retry's attempt kept %q, want %s", a[1].KeptRef, kept)
	}
	if got := gittest.Git(t, repo, "show", kept+":draft.txt"); got != "draft" {
		t.Errorf("the kept ref holds draft.txt = %q", got)
	}
	if tl := strings.Join(state.Timeline(f.Task, time.Now()), "\n"); !strings.Contains(tl, "attempt 1's work kept on "+kept) {
		t.Errorf("the timeline does not name the kept ref:\n%s", tl)
	}
}

// A task made while the person's checkout holds uncommitted changes says
// so once, on its first attempt and in the log (stream agent), naming
// the commit it starts from; the task does not see the changes, and a
// replay does not say it again.
func TestADirtyCheckoutIsSaidOnTheTask(t *testing.T) {
	f, repo := repoFixture(t, "@fail network\n@sh test ! -e mine.txt && grep -qx one README")
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	must(t, os.WriteFile(filepath.Join(repo, "README"), []byte("the person's edit\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(repo, "mine.txt"), []byte("mine\n"), 0o600))
	f.Run(t, context.Background())
	a := f.Task.Attempts
	if f.Task.Phase != state.PhaseCompleted || len(a) != 2 {
		t.Fatalf("task %s, attempts %s; logs:\n%s", f.Task.Phase, runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
	}
	want := state.Checkout{Repo: "site", Base: "main", BaseCommit: head, Changed: 1, Untracked: 1}
	if a[0].Checkout == nil || *a[0].Checkout != want || a[1].Checkout != nil {
		t.Errorf("the attempts' checkout notes: %+v, %+v; want %+v on the first alone", a[0].Checkout, a[1].Checkout, want)
	}
	line := "agent: the checkout of site has uncommitted changes (1 file changed, 1 untracked); this task starts from main at " + head[:7] + " and does not see them"
	n := 0
	for _, l := range f.Rec.Logs() {
		if l == line {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the log says %d times %q:\n%s", n, line, strings.Join(f.Rec.Logs(), "\n"))
	}
	if got := state.CheckoutOf(f.Task); got == nil || *got != want {
		t.Errorf("CheckoutOf: %+v", got)
	}

	clean, _ := repoFixture(t, "@output done")
	clean.Run(t, context.Background())
	if clean.Task.Phase != state.PhaseCompleted || state.CheckoutOf(clean.Task) != nil || runnertest.ContainsSub(clean.Rec.Logs(), "uncommitted changes") {
		t.Errorf("a clean checkout: %s, %+v; logs:\n%s", clean.Task.Phase, state.CheckoutOf(clean.Task), strings.Join(clean.Rec.Logs(), "\n"))
	}
}

// A repository the runner does not serve ends the task at once, with a
// clear reason, before any executor starts.
func TestARepositoryNotServedIsRefused(t *testing.T) {
	f, _ := repoFixture(t, "@output should not run")
	f.Task.Repo = "elsewhere"
	f.Run(t, context.Background())
	a := f.Task.Attempts[0]
	if f.Task.Phase != state.PhaseFailed || len(f.Task.Attempts) != 1 || a.Error == nil || a.Error.Code != state.CodeWorkspace ||
		!strings.Contains(a.Error.Message, `"elsewhere" is not served by this agent`) {
		t.Fatalf("task %s, attempt %+v", f.Task.Phase, a.Error)
	}
	if a.Facts.Output {
		t.Error("the executor ran")
	}
}

// slowWorkspaces makes a workspace only once let go, after the stop it
// waits for, and then fails or not.
type slowWorkspaces struct {
	started, release chan struct{}
	fail             bool
}

func (w slowWorkspaces) Prepare(ctx context.Context, taskID, repo, base string) (runner.Prepared, error) {
	close(w.started)
	<-w.release
	if ctx.Err() != nil {
		return runner.Prepared{}, ctx.Err() // it was cut part-way
	}
	if w.fail {
		return runner.Prepared{}, errors.New("git worktree add: fatal: something went wrong")
	}
	return runner.Prepared{}, nil
}

func (slowWorkspaces) Reset(context.Context, string, int) (string, error) { return "", nil }

func (slowWorkspaces) Commit(context.Context, string, string) (string, error) { return "", nil }

func (slowWorkspaces) BringBack(context.Context, string) error { return nil }

func (slowWorkspaces) Diff(context.Context, string) (*state.DiffEvent, error) { return nil, nil }

func (slowWorkspaces) Changes(context.Context, string) (*state.Changes, error) {
	return nil, workspace.ErrNoWorkspace
}

// The agent's stop while a workspace is being made is a stop: the making
// is never cut part-way, and the task waits for the agent's next run
// rather than failing for good, whether the workspace came out or not.
func TestAStopWhileTheWorkspaceIsMadeIsAStop(t *testing.T) {
	for _, fail := range []bool{false, true} {
		f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@output hi")
		f.Runner.WorkRoot = t.TempDir()
		w := slowWorkspaces{started: make(chan struct{}), release: make(chan struct{}), fail: fail}
		f.Runner.Workspaces = w
		f.Task.Repo = "site"
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() {
			<-w.started
			cancel(runner.ErrShutdown)
			close(w.release)
		}()
		if err := f.Runner.Run(ctx, f.Task); err != nil {
			t.Fatal(err)
		}
		a := f.Task.Attempts[0]
		if f.Task.Phase != state.PhaseExecutorStarting || a.Error == nil || a.Error.Code != state.CodeAgentShutdown || len(f.Task.Attempts) != 2 {
			t.Errorf("workspace failing %v: task %s, attempts %s", fail, f.Task.Phase, runnertest.AttemptsText(f.Task))
		}
	}
}

// confinedRepoFixture is repoFixture with every attempt confined as the
// agent confines it (Landlock; the work root out of every other task's
// reach), the repository out of a task's reach as the agent requires.
func confinedRepoFixture(t *testing.T, prompt string) (*runnertest.Fixture, string, *workspace.Manager) {
	t.Helper()
	if landlock.ABI() == 0 {
		t.Fatal("no Landlock on this kernel: these machines have it; the test cannot run without")
	}
	f, repo := repoFixture(t, prompt)
	f.Runner.Isolation = &runner.Isolation{}
	return f, repo, f.Runner.Workspaces.(workspaces).m
}

// A confined task writes a symbolic ref (to the person's main) where its
// branch is, and fails; meanwhile the person commits on main, then
// retries the task, which replays it. The replay's reset, the report of
// what the task changed and the removal of its workspace follow no link
// the task made: main keeps the person's commit, and outlives the
// workspace.
func TestASymbolicRefATaskWritesMovesNoBranchOfThePersons(t *testing.T) {
	attack := `@no-session
@sh printf 'ref: refs/heads/main\n' > "$(git rev-parse --path-format=absolute --git-common-dir)/refs/heads/agent/t-1"
@fail network
@output done`
	ctx := context.Background()
	f, repo, m := confinedRepoFixture(t, attack)
	f.Run(t, ctx)
	if f.Task.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("task %s (%s); logs:\n%s", f.Task.Phase, f.Task.PhaseReason, strings.Join(f.Rec.Logs(), "\n"))
	}
	gittest.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "the person's newer work")
	newer := gittest.Git(t, repo, "rev-parse", "main")
	must(t, f.Task.RetryByPerson(time.Now()))
	must(t, f.Task.Transition(state.PhaseClaimed, "claimed by agent-1", time.Now()))
	f.Run(t, ctx)
	if a := f.Task.Attempts; f.Task.Phase != state.PhaseCompleted || len(a) != 2 || a[1].Continues != 0 {
		t.Fatalf("task %s, attempts %s; logs:\n%s", f.Task.Phase, runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
	}
	if got, err := gitOut(repo, "rev-parse", "--verify", "-q", "refs/heads/main"); err != nil || got != newer {
		t.Errorf("main is %q (%v) after the replay, want the person's newer commit %s", got, err, newer)
	}
	if out, err := gitOut(repo, "symbolic-ref", "-q", "refs/heads/agent/t-1"); err == nil {
		t.Errorf("the task's branch in the person's repository is a symbolic ref to %s", out)
	}
	if _, err := m.Remove(ctx, f.Task.ID, true); err != nil {
		t.Errorf("remove: %v", err)
	}
	if got, err := gitOut(repo, "rev-parse", "--verify", "-q", "refs/heads/main"); err != nil || got != newer {
		t.Errorf("after the workspace's removal main is %q (%v), want %s", got, err, newer)
	}
}

// A confined task goes for another task's branch and the person's: in
// the repository (update-ref, or writing the ref files) and in the other
// task's own work directory. None moves, none is deleted or made a link.
func TestATaskMovesNoOtherBranch(t *testing.T) {
	ctx := context.Background()
	f, repo, m := confinedRepoFixture(t, "")
	base := gittest.Git(t, repo, "rev-parse", "main")
	other, err := m.Prepare(ctx, "other", "site", "")
	if err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, other.Dir, "commit", "-q", "--allow-empty", "-m", "the other task's work")
	otherHead := gittest.Git(t, other.Dir, "rev-parse", "HEAD")
	if _, err := m.BringBack(ctx, "other"); err != nil { // the other task's attempt ends
		t.Fatal(err)
	}
	gittest.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "the person's work")
	mainHead := gittest.Git(t, repo, "rev-parse", "main")
	gitDir := filepath.Join(repo, ".git")
	tries := []string{
		"git -C " + repo + " update-ref refs/heads/main " + base,
		"git -C " + repo + " update-ref refs/heads/agent/other " + base,
		"git -C " + repo + " update-ref -d refs/heads/agent/other",
		"git -C " + repo + " branch -f agent/other " + base,
		"printf 'ref: refs/heads/main\\n' > " + filepath.Join(gitDir, "refs", "heads", "agent", "other"),
		"echo " + base + " > " + filepath.Join(gitDir, "refs", "heads", "main"),
		"rm -f " + filepath.Join(gitDir, "refs", "heads", "agent", "other"),
		"git -C " + other.Dir + " update-ref refs/heads/agent/other " + base,
		"echo " + base + " > " + filepath.Join(other.Dir, ".git", "refs", "heads", "agent", "other"),
	}
	var prompt strings.Builder
	for _, try := range tries {
		// Each as a command of its own, whatever the one before did.
		prompt.WriteString("@sh " + try + " || true\n")
	}
	prompt.WriteString("@output done")
	f.Task.Prompt = prompt.String()
	f.Run(t, ctx)
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s); logs:\n%s", f.Task.Phase, f.Task.PhaseReason, strings.Join(f.Rec.Logs(), "\n"))
	}
	if got, err := gitOut(repo, "rev-parse", "--verify", "-q", "refs/heads/main"); err != nil || got != mainHead {
		t.Errorf("main is %q (%v), want %s", got, err, mainHead)
	}
	if out, err := gitOut(repo, "symbolic-ref", "-q", "refs/heads/agent/other"); err == nil {
		t.Errorf("agent/other is a symbolic ref to %s", out)
	}
	if got, err := gitOut(repo, "rev-parse", "--verify", "-q", "refs/heads/agent/other"); err != nil || got != otherHead {
		t.Errorf("agent/other in the repository is %q (%v), want %s", got, err, otherHead)
	}
	if got, err := gitOut(other.Dir, "rev-parse", "HEAD"); err != nil || got != otherHead {
		t.Errorf("the other task's own branch is at %q (%v), want %s", got, err, otherHead)
	}
	if i, err := m.Inspect(ctx, "other"); err != nil || i.Commits != 1 {
		t.Errorf("the other task's workspace: %+v, %v; want its commit", i, err)
	}
}

// gitOut runs git in dir and returns its trimmed output and error.
func gitOut(dir string, args ...string) (string, error) {
	cmd := osexec.Command("git", append(gittest.Identity, args...)...)
	cmd.Dir = dir
	cmd.Env = gittest.Env()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
