package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/state"
)

// Repo is a repository the agent serves: a [[repo]] table of its config.
type Repo struct {
	// Name is what tasks call it (agent submit --repo NAME).
	Name string `json:"name"`
	// Path is the repository's checkout on this machine.
	Path string `json:"path"`
	// Push, if set, is the remote of the repository to which the agent
	// pushes a completed task's branch (Manager.Push).
	Push string `json:"push,omitempty"`
}

// BranchPrefix starts the name of every task's branch: agent/TASK_ID.
const BranchPrefix = "agent/"

// RecordsDir is the directory, under the manager's root, that holds what
// the manager knows of each workspace (TASK_ID.json). Its name starts
// with a dot, as no task id does, so that it is never a task's work
// directory.
const RecordsDir = ".workspaces"

// namePattern is what a repository's name may be.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ErrNotServed: a task names a repository the agent does not serve.
var ErrNotServed = errors.New("repository not served")

// ErrBadRepo marks New's refusal of a repository of the config (a bad
// name, a path that is not a git repository): a mistake in the
// configuration, not in a task.
var ErrBadRepo = errors.New("bad repository")

// badRepo is a refusal of New, said as it is and marked ErrBadRepo.
type badRepo struct{ error }

// BadRepo marks err as a mistake in the config's repositories
// (ErrBadRepo).
func BadRepo(err error) error { return badRepo{err} }

func (e badRepo) Is(target error) bool { return target == ErrBadRepo }
func (e badRepo) Unwrap() error        { return e.error }

// ErrNoWorkspace: the task has no workspace.
var ErrNoWorkspace = errors.New("no workspace")

// Manager makes, resets, inspects and removes the workspaces of tasks: a
// clone per task, ROOT/TASK_ID, on the branch agent/TASK_ID. Its
// methods are safe for concurrent use; calls that change a repository's
// shared state (Prepare, Remove) are serialized per repository.
type Manager struct {
	root  string
	repos []repo
	// Author is who the agent's commits are by (Commit, and what Reset
	// keeps); DefaultAuthor when empty. Set it before the manager is
	// used.
	Author Author

	mu    sync.Mutex
	locks map[string]*sync.Mutex // by common git directory
}

// repo is a served repository as New found it.
type repo struct {
	Repo
	// gitDir is the checkout's own git directory (its HEAD), commonDir
	// the directory its worktrees share (objects, refs, config).
	gitDir, commonDir string
}

// New returns a manager of workspaces under root (the agent's work root:
// a task's workspace is root/TASK_ID) for repos. Each repo must have a
// unique name of letters, digits, '.', '_' and '-', and a path that is a
// git repository. No repo is fine: the manager then serves none, and
// still lists and removes the workspaces under root.
func New(root string, repos []Repo) (*Manager, error) {
	if root == "" {
		return nil, errors.New("workspaces: no work directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("workspaces: %v", err)
	}
	m := &Manager{root: abs, locks: map[string]*sync.Mutex{}, Author: DefaultAuthor()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range repos {
		if err := m.add(ctx, r); err != nil {
			return nil, badRepo{err}
		}
	}
	return m, nil
}

// add checks and adds a repository to serve.
func (m *Manager) add(ctx context.Context, r Repo) error {
	if !namePattern.MatchString(r.Name) {
		return fmt.Errorf("repository name %q: want letters, digits, '.', '_' or '-', starting with a letter or digit, at most 64", r.Name)
	}
	if slices.ContainsFunc(m.repos, func(o repo) bool { return o.Name == r.Name }) {
		return fmt.Errorf("repository %q is named twice", r.Name)
	}
	found, err := findRepo(ctx, r)
	if err != nil {
		return err
	}
	m.repos = append(m.repos, found)
	return nil
}

// findRepo checks that r's path is a git repository the manager can
// serve, and finds its git directories.
func findRepo(ctx context.Context, r Repo) (repo, error) {
	if r.Path == "" {
		return repo{}, fmt.Errorf("repository %q: no path", r.Name)
	}
	path, err := filepath.Abs(r.Path)
	if err != nil {
		return repo{}, fmt.Errorf("repository %q: %v", r.Name, err)
	}
	if info, err := os.Stat(path); err != nil {
		return repo{}, fmt.Errorf("repository %q: %v", r.Name, err)
	} else if !info.IsDir() {
		return repo{}, fmt.Errorf("repository %q: %s is not a directory", r.Name, path)
	}
	out, err := runGit(ctx, gitDirs{dir: path}, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
	if err != nil {
		return repo{}, fmt.Errorf("repository %q: %s is not a git repository (%v)", r.Name, path, err)
	}
	dirs := strings.Fields(out)
	if len(dirs) != 2 {
		return repo{}, fmt.Errorf("repository %q: git rev-parse said %q", r.Name, out)
	}
	r.Path = path
	return repo{Repo: r, gitDir: dirs[0], commonDir: dirs[1]}, nil
}

// Serves reports whether the manager serves the repository name.
func (m *Manager) Serves(name string) bool {
	_, ok := m.repo(name)
	return ok
}

// Names are the names of the repositories served, in the config's order.
func (m *Manager) Names() []string {
	names := make([]string, len(m.repos))
	for i, r := range m.repos {
		names[i] = r.Name
	}
	return names
}

// Repos are the repositories served, in the config's order.
func (m *Manager) Repos() []Repo {
	repos := make([]Repo, len(m.repos))
	for i, r := range m.repos {
		repos[i] = r.Repo
	}
	return repos
}

// Root is the directory the workspaces are in.
func (m *Manager) Root() string { return m.root }

func (m *Manager) repo(name string) (repo, bool) {
	for _, r := range m.repos {
		if r.Name == name {
			return r, true
		}
	}
	return repo{}, false
}

// notServed says that the manager does not serve a repository.
func (m *Manager) notServed(name string) error {
	serves := "none"
	if len(m.repos) > 0 {
		serves = strings.Join(m.Names(), ", ")
	}
	return fmt.Errorf("%w: repository %q is not served by this agent (it serves: %s)", ErrNotServed, name, serves)
}

// lock serializes the calls that change a repository's shared state.
func (m *Manager) lock(commonDir string) func() {
	m.mu.Lock()
	l := m.locks[commonDir]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[commonDir] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Workspace is a task's workspace: a clone of the repository of its own.
type Workspace struct {
	TaskID string `json:"task_id"`
	Repo   string `json:"repo"`
	// RepoPath is the repository's checkout, as it was when the workspace
	// was made.
	RepoPath string `json:"repo_path"`
	// Dir is the clone: the task's work directory, its git directory
	// Dir/.git.
	Dir string `json:"dir"`
	// Branch is the task's own branch, agent/TASK_ID, in its clone and,
	// once the agent has brought work back, in the repository.
	Branch string `json:"branch"`
	// Base is the ref the branch was made from (the repository's branch
	// when the task named none); BaseCommit the commit it named then.
	Base       string    `json:"base"`
	BaseCommit string    `json:"base_commit"`
	CreatedAt  time.Time `json:"created_at"`
	// Checkout, when the person's checkout of the repository held changes
	// no commit holds as the workspace was made (or its status could not
	// be read), says so: the task does not see them.
	Checkout *state.Checkout `json:"checkout,omitempty"`

	// CommonDir is the repository's shared git directory: its objects,
	// which the clone borrows (read only), and its refs.
	CommonDir string `json:"common_dir"`
	// Brought is the commit the agent last set the repository's branch
	// agent/TASK_ID to ("" before it first brought work back): what it
	// expects to find there when it next brings work back or removes
	// the branch.
	Brought string `json:"brought,omitempty"`

	// Pushed is the commit the agent last pushed of the branch, to the
	// remote PushedTo: what it expects the remote's branch to hold when
	// it next pushes.
	Pushed   string `json:"pushed,omitempty"`
	PushedTo string `json:"pushed_to,omitempty"`

	// AdminDir and LastHead are a workspace of the earlier kind, a git
	// worktree of the repository (see legacy.go): its git directory,
	// COMMON/worktrees/NAME, and the head the agent saw at the task's
	// end. A clone has neither.
	AdminDir string `json:"admin_dir,omitempty"`
	LastHead string `json:"last_head,omitempty"`
}

// ref is the branch's full ref name.
func (w *Workspace) ref() string { return "refs/heads/" + w.Branch }

// legacy reports whether w is a git worktree of the repository, made by
// an agent from before clones.
func (w *Workspace) legacy() bool { return w.AdminDir != "" }

// repoDirs runs git on the repository.
func (w *Workspace) repoDirs() gitDirs {
	return gitDirs{dir: w.CommonDir, gitDir: w.CommonDir}
}

// repoObjects is the repository's object directory, which the clone
// borrows.
func (w *Workspace) repoObjects() string { return filepath.Join(w.CommonDir, "objects") }

// cloneObjects is the clone's own object directory.
func (w *Workspace) cloneObjects() string { return filepath.Join(w.Dir, ".git", "objects") }

// oidLen is the length of the repository's object ids.
func (w *Workspace) oidLen() int { return len(w.BaseCommit) }

// zeroOID is the object id git takes for "no ref".
func (w *Workspace) zeroOID() string { return strings.Repeat("0", w.oidLen()) }

// recordsDir is the manager's directory of records, out of every task's
// reach (the work root is denied to them all).
func (w *Workspace) recordsDir() string { return filepath.Join(filepath.Dir(w.Dir), RecordsDir) }

// view is the manager's own git directory for reading the task's work,
// ROOT/.workspaces/TASK_ID.git: its config is the manager's, its objects
// borrow the repository's and the clone's, its index is its own.
func (w *Workspace) view() string { return filepath.Join(w.recordsDir(), w.TaskID+".git") }

// making is where a clone is made before it takes the work directory's
// place (see settle).
func (w *Workspace) making() string { return filepath.Join(w.recordsDir(), w.TaskID+".new") }

// leaving is where a replaced clone goes on its way out.
func (w *Workspace) leaving() string { return filepath.Join(w.recordsDir(), w.TaskID+".old") }

// Writable are the paths a confined task must be able to write for git
// to work in its workspace: its work directory alone, the clone's git
// directory in it. Nothing of the repository: the clone borrows its
// objects, read only.
func (w *Workspace) Writable() []string { return []string{w.Dir} }

func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

// checkTaskID refuses an id that is not one directory name.
func checkTaskID(id string) error {
	if id == "" || id != filepath.Base(id) || strings.HasPrefix(id, ".") || strings.ContainsAny(id, `/\`) {
		return fmt.Errorf("task id %q cannot name a workspace", id)
	}
	return nil
}

// Prepare gives task taskID a workspace of repository repoName: a clone
// at ROOT/TASK_ID on a new branch agent/TASK_ID, made from base (a
// branch, tag or commit; the repository's HEAD when empty). It is
// idempotent: a task that has its workspace (an agent restarting) gets it
// as it is, made a clone first if an earlier agent made it a worktree;
// asking it of another repository or base is an error. Making it, it
// reads the status of the person's checkout of the repository: what the
// checkout holds that no commit does, which the task does not see, is
// said in the workspace's Checkout.
func (m *Manager) Prepare(ctx context.Context, taskID, repoName, base string) (*Workspace, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	r, ok := m.repo(repoName)
	if !ok {
		return nil, m.notServed(repoName)
	}
	if w, err := m.load(taskID); err == nil {
		switch {
		case w.Repo != repoName:
			return nil, fmt.Errorf("task %s has a workspace of repository %q, not %q", taskID, w.Repo, repoName)
		case base != "" && base != w.Base:
			return nil, fmt.Errorf("task %s has a workspace made from %s, not %s", taskID, w.Base, base)
		}
		return m.open(ctx, taskID)
	} else if !errors.Is(err, ErrNoWorkspace) {
		return nil, err
	}
	defer m.lock(r.commonDir)()
	w := &Workspace{TaskID: taskID, Repo: r.Name, RepoPath: r.Path, Dir: filepath.Join(m.root, taskID), Branch: BranchPrefix + taskID,
		CommonDir: r.commonDir, CreatedAt: time.Now().UTC()}
	var err error
	if w.Base, w.BaseCommit, err = r.resolve(ctx, base); err != nil {
		return nil, err
	}
	w.Checkout = r.checkout(ctx, w.Base, w.BaseCommit)
	if b, err := w.repoBranch(ctx); err != nil {
		return nil, err
	} else if b.oid != "" || b.symbolic != "" {
		return nil, fmt.Errorf("repository %q already has a branch %s; remove it (git branch -D %s) to run task %s there", r.Name, w.Branch, w.Branch, taskID)
	}
	if entries, err := os.ReadDir(w.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("work directory %s already holds files and is not a workspace; move it away to run task %s in a workspace", w.Dir, taskID)
	}
	if err := os.MkdirAll(filepath.Join(m.root, RecordsDir), 0o700); err != nil {
		return nil, fmt.Errorf("workspaces: %v", err)
	}
	// What a Prepare cut short left holds nothing of a task's: no
	// attempt runs before the record.
	if err := removeTree(w.making()); err != nil {
		return nil, err
	}
	if err := w.makeClone(ctx, w.making(), w.BaseCommit, true); err != nil {
		return nil, fmt.Errorf("repository %q: %v", r.Name, err)
	}
	if err := w.makeView(ctx); err != nil {
		return nil, fmt.Errorf("repository %q: %v", r.Name, err)
	}
	// The record first: a crash before the clone takes its place leaves
	// it where settle finds it.
	if err := m.save(w); err != nil {
		return nil, err
	}
	if err := w.settle(); err != nil {
		return nil, err
	}
	return w, nil
}

// resolve finds the commit base names, and the name to record for it:
// base itself, or for an empty base the repository's branch (HEAD when
// it is detached).
func (r repo) resolve(ctx context.Context, base string) (name, commit string, err error) {
	d := gitDirs{dir: r.gitDir, gitDir: r.gitDir, commonDir: r.commonDir}
	name = base
	if base == "" {
		name = "HEAD"
		if out, err := runGit(ctx, d, "symbolic-ref", "-q", "--short", "HEAD"); err == nil && strings.TrimSpace(out) != "" {
			name = strings.TrimSpace(out)
		}
	}
	out, err := runGit(ctx, d, "rev-parse", "--verify", "-q", "--end-of-options", name+"^{commit}")
	if err != nil {
		if base == "" {
			return "", "", fmt.Errorf("repository %q has no commit at HEAD to start from", r.Name)
		}
		return "", "", fmt.Errorf("base %q is not a branch, tag or commit of repository %q", base, r.Name)
	}
	return name, strings.TrimSpace(out), nil
}

// isBeneath reports whether path is inside dir.
func isBeneath(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// Get returns task taskID's workspace, or an error wrapping
// ErrNoWorkspace.
func (m *Manager) Get(taskID string) (*Workspace, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	return m.load(taskID)
}

// open returns task taskID's workspace for the agent to work on, between
// its attempts: a clone settled in its place, one made from a worktree
// an earlier agent made.
func (m *Manager) open(ctx context.Context, taskID string) (*Workspace, error) {
	w, err := m.Get(taskID)
	if err != nil {
		return nil, err
	}
	if w.legacy() {
		if err := m.migrate(ctx, w); err != nil {
			return nil, fmt.Errorf("workspace %s: made a clone of the worktree an earlier agent made: %v", taskID, err)
		}
		return w, nil
	}
	if err := w.settle(); err != nil {
		return nil, err
	}
	return w, nil
}

// KeptRefPrefix starts the refs of the repository on which a replay
// keeps what the attempt before it left:
// refs/agent/kept/TASK_ID/attempt-N. Not a branch (refs/heads/) nor a
// tag: no checkout, branch list or default fetch or push sees them, and
// no other task's branch can be named so; one per task and attempt, so
// that no replay overwrites what an earlier one kept.
const KeptRefPrefix = "refs/agent/kept/"

// KeptRef is the ref on which a replay of task taskID keeps what its
// attempt numbered attempt left.
func KeptRef(taskID string, attempt int) string {
	return fmt.Sprintf("%s%s/attempt-%d", KeptRefPrefix, taskID, attempt)
}

// Reset brings task taskID's workspace back to its base, for a replay.
// First what the task's branch holds is brought back to the repository
// (BringBack; a branch refused is not), and what the clone holds that
// the base does not is kept on the repository's ref KeptRef(taskID,
// attempt), attempt being the one that left it: the branch's head, with
// the files no commit holds committed on top of it by the manager's
// Author (on top of the base when the branch is refused). Then the
// clone is made again from the base commit, every file of the earlier
// attempts gone, its git directory too. It returns the kept ref's name,
// "" when the clone held nothing of its own (or what it held could not
// be read: the task made its clone unreadable). A failure to bring the
// work back or keep it stops the reset, which would lose it.
func (m *Manager) Reset(ctx context.Context, taskID string, attempt int) (string, error) {
	w, err := m.open(ctx, taskID)
	if err != nil {
		return "", err
	}
	if _, err := m.bringBack(ctx, w); err != nil && !isRefused(err) {
		return "", fmt.Errorf("workspace %s: the task's work was not brought back, so it is not reset: %v", taskID, err)
	}
	kept, err := m.keep(ctx, w, attempt)
	if err != nil && !isRefused(err) {
		return "", fmt.Errorf("workspace %s: what the task left was not kept, so it is not reset: %v", taskID, err)
	}
	if err := removeTree(w.making()); err != nil {
		return "", err
	}
	if err := w.makeClone(ctx, w.making(), w.BaseCommit, true); err != nil {
		return "", fmt.Errorf("workspace %s: %v", taskID, err)
	}
	if isDir(w.Dir) {
		if err := removeTree(w.leaving()); err != nil {
			return "", err
		}
		if err := os.Rename(w.Dir, w.leaving()); err != nil {
			return "", fmt.Errorf("workspace %s: %v", taskID, err)
		}
	}
	if err := w.settle(); err != nil {
		return "", err
	}
	// Its stat cache is of files now gone.
	if err := os.Remove(filepath.Join(w.view(), "index")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return kept, nil
}

// keep keeps what w's clone holds that its base does not on the ref
// KeptRef(w.TaskID, attempt) of the repository, and returns its name
// ("" for nothing). The ref is made, never moved: one a keep cut short
// made already with another commit is left, and the next name tried
// (attempt-N.2, …).
func (m *Manager) keep(ctx context.Context, w *Workspace, attempt int) (string, error) {
	g, err := w.openClone()
	if err != nil {
		return "", err
	}
	defer g.Close()
	parent, err := w.branchHead(ctx, g)
	if err != nil {
		if !isRefused(err) {
			return "", err
		}
		parent = w.BaseCommit
	}
	s, err := w.stage(ctx, g, parent, "")
	if err != nil {
		return "", err
	}
	defer s.drop()
	commit := parent
	if tree, err := w.treeOf(ctx, parent); err != nil {
		return "", err
	} else if tree != s.tree {
		d := w.viewDirs("")
		d.env = m.Author.env()
		msg := fmt.Sprintf("agent: what attempt %d of task %s left uncommitted\n\nAgent-Task: %s\n", attempt, w.TaskID, w.TaskID)
		out, err := runGitIn(ctx, d, msg, "commit-tree", "--no-gpg-sign", s.tree, "-p", parent)
		if err != nil {
			return "", err
		}
		commit = strings.TrimSpace(out)
	}
	if commit == w.BaseCommit {
		return "", nil
	}
	defer m.lock(w.CommonDir)()
	if err := w.fetch(ctx, commit); err != nil {
		return "", err
	}
	for i := 1; i <= 10; i++ {
		ref := KeptRef(w.TaskID, attempt)
		if i > 1 {
			ref += "." + strconv.Itoa(i)
		}
		out, err := runGit(ctx, w.repoDirs(), "for-each-ref", "--format=%(objectname)", ref)
		if err != nil {
			return "", err
		}
		switch strings.TrimSpace(out) {
		case commit:
			return ref, nil
		case "":
			if _, err := runGit(ctx, w.repoDirs(), "update-ref", "--no-deref", "-m", "agent: what attempt "+strconv.Itoa(attempt)+" of task "+w.TaskID+" left",
				ref, commit, w.zeroOID()); err != nil {
				return "", fmt.Errorf("repository %q: %v", w.Repo, err)
			}
			return ref, nil
		}
	}
	return "", fmt.Errorf("repository %q: %s and the nine names after it are taken", w.Repo, KeptRef(w.TaskID, attempt))
}

// settle puts a clone made (Prepare, Reset) in the work directory's
// place, if a crash left it aside, and removes what it replaced.
func (w *Workspace) settle() error {
	if !isDir(w.Dir) && isDir(w.making()) {
		if err := os.Rename(w.making(), w.Dir); err != nil {
			return fmt.Errorf("workspace %s: %v", w.TaskID, err)
		}
		if err := durable.SyncDir(filepath.Dir(w.Dir)); err != nil {
			return err
		}
	}
	if err := removeTree(w.leaving()); err != nil {
		return fmt.Errorf("workspace %s: %v", w.TaskID, err)
	}
	if !isDir(w.Dir) {
		return fmt.Errorf("workspace %s: its directory %s is gone", w.TaskID, w.Dir)
	}
	return nil
}

// recordPath is where the manager keeps what it knows of a workspace.
func (m *Manager) recordPath(taskID string) string {
	return filepath.Join(m.root, RecordsDir, taskID+".json")
}

func (m *Manager) load(taskID string) (*Workspace, error) {
	b, err := os.ReadFile(m.recordPath(taskID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: task %s has no workspace", ErrNoWorkspace, taskID)
	}
	if err != nil {
		return nil, err
	}
	var w Workspace
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%s: %v", m.recordPath(taskID), err)
	}
	if w.TaskID != taskID || w.Dir != filepath.Join(m.root, taskID) || w.Branch != BranchPrefix+taskID || !filepath.IsAbs(w.CommonDir) ||
		!isOID(w.BaseCommit, len(w.BaseCommit)) || len(w.BaseCommit) != 40 && len(w.BaseCommit) != 64 ||
		w.legacy() && !isBeneath(w.AdminDir, filepath.Join(w.CommonDir, "worktrees")) {
		return nil, fmt.Errorf("%s: not the record of task %s's workspace", m.recordPath(taskID), taskID)
	}
	return &w, nil
}

// save writes w's record, atomically and durably: the file 0600, its
// directory 0700.
func (m *Manager) save(w *Workspace) error {
	dir := filepath.Join(m.root, RecordsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(w, "", "  ")
	if err := atomic.WriteFile(m.recordPath(w.TaskID), strings.NewReader(string(b)+"\n")); err != nil {
		return err
	}
	if err := os.Chmod(m.recordPath(w.TaskID), 0o600); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}
