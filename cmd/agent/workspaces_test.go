package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// workspacesBed is a data directory whose work directory holds three
// workspaces of one real repository: done (clean), ahead (a commit only
// it holds, brought back to the repository) and running (its task not
// finished, a commit of an attempt brought back).
func workspacesBed(t *testing.T) (dataDir, repo string) {
	t.Helper()
	dataDir = filepath.Join(t.TempDir(), "data")
	repo = filepath.Join(gittest.OutOfReach(t), "app")
	gittest.Git(t, t.TempDir(), "init", "-q", "-b", "main", repo)
	gittest.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "first")
	m, err := workspace.New(filepath.Join(dataDir, "work"), []workspace.Repo{{Name: "app", Path: repo}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.OpenStore(datadir.Layout{Dir: dataDir}.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"done", "ahead", "running"} {
		if _, err := m.Prepare(context.Background(), id, "app", ""); err != nil {
			t.Fatal(err)
		}
		phase := state.PhaseCompleted
		if id == "running" {
			phase = state.PhaseTurnStarted
		}
		if err := store.Save(&state.Task{ID: id, Prompt: "p", Phase: phase, Repo: "app", CreatedAt: now, UpdatedAt: now, Attempts: []state.Attempt{}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"ahead", "running"} {
		gittest.Git(t, filepath.Join(dataDir, "work", id), "commit", "-q", "--allow-empty", "-m", "work of "+id)
		if _, err := m.BringBack(context.Background(), id); err != nil { // the end of an attempt
			t.Fatal(err)
		}
	}
	return dataDir, repo
}

func TestWorkspacesLsAndRm(t *testing.T) {
	t.Parallel()
	dataDir, repo := workspacesBed(t)
	r := runAgent(t, "workspaces", "ls", "--data-dir", dataDir)
	if r.code != 0 {
		t.Fatalf("workspaces ls: %+v", r)
	}
	for _, row := range []string{
		`(?m)^TASK\s+REPO\s+BRANCH\s+SIZE\s+STATE$`,
		`(?m)^done\s+app\s+agent/done\s+\S+ \S+\s+clean$`,
		`(?m)^ahead\s+app\s+agent/ahead\s+\S+ \S+\s+kept: 1 commit not on main$`,
		`(?m)^running\s+app\s+agent/running\s+\S+ \S+\s+kept: 1 commit not on main$`,
		`(?m)^3 workspaces, \S+ \S+, in ` + regexp.QuoteMeta(filepath.Join(dataDir, "work")) + `$`,
	} {
		if !regexp.MustCompile(row).MatchString(r.stdout) {
			t.Errorf("workspaces ls has no line %s:\n%s", row, r.stdout)
		}
	}
	r = runAgent(t, "workspaces", "ls", "--data-dir", dataDir, "--json")
	var views []struct {
		TaskID  string `json:"task_id"`
		Commits int    `json:"commits"`
		State   string `json:"state"`
		Bytes   int64  `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &views); err != nil || len(views) != 3 {
		t.Fatalf("workspaces ls --json: %v: %s", err, r.stdout)
	}
	for _, v := range views {
		if v.TaskID == "ahead" && (v.Commits != 1 || v.State != "kept: 1 commit not on main" || v.Bytes <= 0) {
			t.Errorf("ahead in JSON: %+v", v)
		}
	}

	// Work would be lost: refused, one line, exit 1, nothing removed.
	r = runAgent(t, "workspaces", "rm", "ahead", "--data-dir", dataDir)
	wantOneLineError(t, r, 1, "workspace of task ahead has 1 commit not on main; agent workspaces rm ahead --force drops them")
	if _, err := os.Stat(filepath.Join(dataDir, "work", "ahead")); err != nil {
		t.Fatalf("refused rm removed the worktree: %v", err)
	}
	// A task not finished: refused even with --force.
	r = runAgent(t, "workspaces", "rm", "running", "--data-dir", dataDir, "--force")
	wantOneLineError(t, r, 1, "task running is turn_started, not finished: its workspace is in use")
	// Clean: removed, and said.
	r = runAgent(t, "workspaces", "rm", "done", "--data-dir", dataDir)
	if want := "removed the workspace of task done: " + filepath.Join(dataDir, "work", "done") + "\n"; r.code != 0 || r.stdout != want {
		t.Errorf("rm done: %+v, want %q", r, want)
	}
	// Forced: removed, and what was dropped said.
	r = runAgent(t, "workspaces", "rm", "ahead", "--data-dir", dataDir, "--force")
	if r.code != 0 || !strings.HasSuffix(r.stdout, " and branch agent/ahead of app; dropped 1 commit not on main\n") {
		t.Errorf("rm ahead --force: %+v", r)
	}
	for _, id := range []string{"done", "ahead"} {
		if _, err := os.Stat(filepath.Join(dataDir, "work", id)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("worktree of %s still there: %v", id, err)
		}
	}
	if out := gittest.Git(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/agent/"); out != "agent/running" {
		t.Errorf("branches left: %q, want agent/running", out)
	}
	r = runAgent(t, "workspaces", "rm", "nope", "--data-dir", dataDir)
	wantOneLineError(t, r, 1, "no workspace: task nope has no workspace")
	r = runAgent(t, "workspaces", "rm", "--data-dir", dataDir)
	wantOneLineError(t, r, 2, "takes one task id")
}

// The work directory comes from the settings, as agent run's does.
func TestWorkspacesFollowTheWorkDirSetting(t *testing.T) {
	t.Parallel()
	r := runAgentEnv(t, []string{"AGENT_WORK_DIR=" + filepath.Join(t.TempDir(), "elsewhere")}, "workspaces", "ls", "--data-dir", t.TempDir())
	if r.code != 0 || !strings.HasPrefix(r.stdout, "no workspaces in ") || !strings.Contains(r.stdout, "elsewhere") {
		t.Errorf("workspaces ls with AGENT_WORK_DIR: %+v", r)
	}
}

// agent health says what the workspaces take, as the agent last measured.
func TestHealthShowsWorkspaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := datadir.HealthFile{AgentID: "a1", UpdatedAt: time.Now(), ControlPlane: "reachable",
		Workspaces: &datadir.WorkspaceUsage{Count: 3, Kept: 1, Bytes: 5 << 20, At: time.Now().Add(-2 * time.Minute)}}
	h.Grade = "available"
	if err := (datadir.Layout{Dir: dir}).WriteHealth(h); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, "health", "--data-dir", dir)
	if !regexp.MustCompile(`(?m)^workspaces:\s+3 taking 5\.0 MiB; 1 kept, holding work \(agent workspaces ls\); measured 2m ago$`).MatchString(r.stdout) {
		t.Errorf("agent health:\n%s", r.stdout)
	}
}
