package agent

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// Retention removes a finished task's workspace with it when that loses
// nothing; one with commits only it holds stays, said once, while the
// task's state and logs go. What the workspaces take is measured for
// agent health and the metrics.
func TestPruneKeepsWorkspacesThatHoldWork(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	b := newPruneBed(t, state.Retention{})
	var logged bytes.Buffer
	b.r.log = slog.New(slog.NewTextHandler(&logged, nil))
	repo := filepath.Join(gittest.OutOfReach(t), "repo")
	gittest.Git(t, t.TempDir(), "init", "-q", "-b", "main", repo)
	gittest.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "first")
	m, err := workspace.New(b.r.workRoot, []workspace.Repo{{Name: "app", Path: repo}})
	must(t, err)
	b.r.workspaces = m
	b.r.usage = &(&Agent{}).usage
	ctx := context.Background()
	for _, id := range []string{"clean", "holds", "young"} {
		_, err := m.Prepare(ctx, id, "app", "")
		must(t, err)
		ended := 8 * day
		if id == "young" {
			ended = day
		}
		must(t, b.r.store.Save(&state.Task{ID: id, Prompt: "p", Phase: state.PhaseCompleted, Repo: "app",
			CreatedAt: b.now.Add(-ended - time.Minute), UpdatedAt: b.now.Add(-ended), Attempts: []state.Attempt{}}))
		must(t, b.r.layout.AppendLog(id, 1, []byte("12:00:00.000 stdout   hello\n")))
	}
	holds := filepath.Join(b.r.workRoot, "holds")
	gittest.Git(t, holds, "commit", "-q", "--allow-empty", "-m", "one")
	gittest.Git(t, holds, "commit", "-q", "--allow-empty", "-m", "two")
	_, err = m.BringBack(ctx, "holds") // the end of its attempt
	must(t, err)

	if res := b.r.prune(ctx); res.tasks != 2 {
		t.Errorf("pruned %d tasks, want 2 (clean, holds)", res.tasks)
	}
	if _, err := os.Stat(filepath.Join(b.r.workRoot, "clean")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("clean workspace left: %v", err)
	}
	if out := gittest.Git(t, repo, "branch", "--list", "agent/*"); strings.Contains(out, "agent/clean") || !strings.Contains(out, "agent/holds") {
		t.Errorf("branches after the prune: %q; want agent/holds kept, agent/clean gone", out)
	}
	if i, err := m.Inspect(ctx, "holds"); err != nil || i.Commits != 2 {
		t.Errorf("kept workspace: %+v, %v", i, err)
	}
	if _, err := b.r.store.Load("holds"); err == nil {
		t.Error("the task whose workspace is kept was not pruned")
	}
	if _, err := os.Stat(b.r.layout.Logs("holds")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("logs of the task whose workspace is kept: %v", err)
	}
	if _, err := b.r.store.Load("young"); err != nil {
		t.Errorf("young task pruned: %v", err)
	}
	b.r.prune(ctx)
	const said = "workspace kept: 2 commits not on main; agent workspaces rm holds to remove"
	if n := strings.Count(logged.String(), said); n != 1 {
		t.Errorf("said %d times %q, want once; log:\n%s", n, said, logged.String())
	}
	u := b.r.usage.Load()
	if u == nil || u.Count != 2 || u.Kept != 1 || u.Bytes <= 0 || !u.At.Equal(b.now) {
		t.Errorf("workspace usage %+v; want 2 workspaces (holds, young), 1 kept, some bytes", u)
	}
}
