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
	"strings"
	"sync"
	"time"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/internal/durable"
)

// Repo is a repository the agent serves: a [[repo]] table of its config.
type Repo struct {
	// Name is what tasks call it (agent submit --repo NAME).
	Name string `json:"name"`
	// Path is the repository's checkout on this machine.
	Path string `json:"path"`
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

func (e badRepo) Is(target error) bool { return target == ErrBadRepo }
func (e badRepo) Unwrap() error        { return e.error }

// ErrNoWorkspace: the task has no workspace.
var ErrNoWorkspace = errors.New("no workspace")

// Manager makes, resets, inspects and removes the workspaces of tasks: a
// git worktree per task, ROOT/TASK_ID, on the branch agent/TASK_ID. Its
// methods are safe for concurrent use; calls that change a repository's
// shared state (Prepare, Remove) are serialized per repository.
type Manager struct {
	root  string
	repos []repo

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
// git repository; a repository whose worktrees read a config of their
// own (extensions.worktreeConfig) is refused, since a task could write
// that file. No repo is fine: the manager then serves none, and still
// lists and removes the workspaces under root.
func New(root string, repos []Repo) (*Manager, error) {
	if root == "" {
		return nil, errors.New("workspaces: no work directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("workspaces: %v", err)
	}
	m := &Manager{root: abs, locks: map[string]*sync.Mutex{}}
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
	found := repo{Repo: r, gitDir: dirs[0], commonDir: dirs[1]}
	if err := found.checkConfig(ctx); err != nil {
		return repo{}, err
	}
	return found, nil
}

// checkConfig refuses a repository whose worktrees read a config of their
// own (extensions.worktreeConfig): a task could write it. Checked when
// the agent starts and again before every attempt, for a person may set
// it meanwhile (git sparse-checkout does).
func (r repo) checkConfig(ctx context.Context) error {
	v, err := runGit(ctx, gitDirs{gitDir: r.commonDir}, "config", "--file", filepath.Join(r.commonDir, "config"), "--type=bool", "--default=false", "extensions.worktreeConfig")
	if err != nil {
		return fmt.Errorf("repository %q: %v", r.Name, err)
	}
	if strings.TrimSpace(v) == "true" {
		return fmt.Errorf("repository %q: its worktrees read a config of their own (extensions.worktreeConfig, set by git sparse-checkout), which a task could write; the agent does not serve it", r.Name)
	}
	return nil
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

// Workspace is a task's worktree.
type Workspace struct {
	TaskID string `json:"task_id"`
	Repo   string `json:"repo"`
	// RepoPath is the repository's checkout, as it was when the workspace
	// was made.
	RepoPath string `json:"repo_path"`
	// Dir is the worktree: the task's work directory.
	Dir string `json:"dir"`
	// Branch is the task's own branch, agent/TASK_ID.
	Branch string `json:"branch"`
	// Base is the ref the branch was made from (the repository's branch
	// when the task named none); BaseCommit the commit it named then.
	Base       string    `json:"base"`
	BaseCommit string    `json:"base_commit"`
	CreatedAt  time.Time `json:"created_at"`

	// CommonDir is the repository's shared git directory; AdminDir the
	// worktree's own, CommonDir/worktrees/NAME.
	CommonDir string `json:"common_dir"`
	AdminDir  string `json:"admin_dir"`
	// LastHead is the branch's head when the agent last looked
	// (Changes, at the task's end): the work is judged from it too, so
	// that another task moving this branch (it may write the agent's
	// branches) does not make the work look saved.
	LastHead string `json:"last_head,omitempty"`
}

// ref is the branch's full ref name.
func (w *Workspace) ref() string { return "refs/heads/" + w.Branch }

// repoDirs runs git on the repository, not on the worktree.
func (w *Workspace) repoDirs() gitDirs {
	return gitDirs{dir: w.CommonDir, gitDir: w.CommonDir}
}

// treeDirs runs git on the worktree, every directory named: nothing is
// discovered from what the task may have written.
func (w *Workspace) treeDirs() gitDirs {
	return gitDirs{dir: w.Dir, gitDir: w.AdminDir, commonDir: w.CommonDir, workTree: w.Dir}
}

// Writable are the paths a confined task must be able to write for git
// to work in its worktree: to add, commit, amend, reset and rebase on its
// branch. Beside the worktree itself, in the repository's shared git
// directory: objects/ (new objects; Landlock cannot grant "create only",
// so a task could also remove objects there), the directories holding
// the agent's branches and their reflogs (refs/heads/agent/ and
// logs/refs/heads/agent/: a commit replaces refs/heads/agent/TASK_ID
// through a lock file beside it; the other branches, packed-refs, HEAD,
// config and hooks stay out of reach), and the worktree's own directory
// worktrees/NAME/ (its HEAD, index, index.lock and reflog). A repository
// whose refs are in a reftable gets reftable/ instead of the ref
// directories. Prepare makes the ref directories when a pack of the refs
// has removed them.
func (w *Workspace) Writable() []string {
	paths := []string{w.Dir, filepath.Join(w.CommonDir, "objects"), w.AdminDir}
	if isDir(filepath.Join(w.CommonDir, "reftable")) {
		return append(paths, filepath.Join(w.CommonDir, "reftable"))
	}
	return append(paths, w.refDirs()...)
}

// refDirs are the directories of the agent's branches and their
// reflogs.
func (w *Workspace) refDirs() []string {
	dirs := []string{filepath.Join(w.CommonDir, "refs", "heads", strings.TrimSuffix(BranchPrefix, "/"))}
	if isDir(filepath.Join(w.CommonDir, "logs")) {
		dirs = append(dirs, filepath.Join(w.CommonDir, "logs", "refs", "heads", strings.TrimSuffix(BranchPrefix, "/")))
	}
	return dirs
}

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

// Prepare gives task taskID a workspace of repository repoName: a git
// worktree at ROOT/TASK_ID on a new branch agent/TASK_ID, made from base
// (a branch, tag or commit; the repository's HEAD when empty). It is
// idempotent: a task that has its workspace (an agent restarting) gets it
// as it is; asking it of another repository or base is an error.
func (m *Manager) Prepare(ctx context.Context, taskID, repoName, base string) (*Workspace, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	r, ok := m.repo(repoName)
	if !ok {
		return nil, m.notServed(repoName)
	}
	defer m.lock(r.commonDir)()
	if err := r.checkConfig(ctx); err != nil {
		return nil, err
	}
	if w, err := m.load(taskID); err == nil {
		switch {
		case w.Repo != repoName:
			return nil, fmt.Errorf("task %s has a workspace of repository %q, not %q", taskID, w.Repo, repoName)
		case base != "" && base != w.Base:
			return nil, fmt.Errorf("task %s has a workspace made from %s, not %s", taskID, w.Base, base)
		}
		if err := w.repair(); err != nil {
			return nil, err
		}
		return w, nil
	} else if !errors.Is(err, ErrNoWorkspace) {
		return nil, err
	}
	w := &Workspace{TaskID: taskID, Repo: r.Name, RepoPath: r.Path, Dir: filepath.Join(m.root, taskID), Branch: BranchPrefix + taskID,
		CommonDir: r.commonDir, CreatedAt: time.Now().UTC()}
	var err error
	if w.Base, w.BaseCommit, err = r.resolve(ctx, base); err != nil {
		return nil, err
	}
	if tip, err := runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", w.ref()); err == nil {
		if strings.TrimSpace(tip) != w.BaseCommit || !m.dropHalfMade(ctx, w) {
			return nil, fmt.Errorf("repository %q already has a branch %s; remove it (git branch -D %s) to run task %s there", r.Name, w.Branch, w.Branch, taskID)
		}
	}
	if entries, err := os.ReadDir(w.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("work directory %s already holds files and is not a workspace; move it away to run task %s in a workspace", w.Dir, taskID)
	}
	if err := os.MkdirAll(m.root, 0o700); err != nil {
		return nil, fmt.Errorf("workspaces: %v", err)
	}
	if _, err := runGit(ctx, w.repoDirs(), "worktree", "add", "--quiet", "-b", w.Branch, w.Dir, w.BaseCommit); err != nil {
		return nil, fmt.Errorf("repository %q: %v", r.Name, err)
	}
	// Nothing of the task has run in it yet: its .git file is git's.
	if w.AdminDir, err = readGitFile(w.Dir); err != nil {
		return nil, err
	}
	if !isBeneath(w.AdminDir, filepath.Join(w.CommonDir, "worktrees")) {
		return nil, fmt.Errorf("worktree %s: its git directory %s is not in %s", w.Dir, w.AdminDir, filepath.Join(w.CommonDir, "worktrees"))
	}
	if err := os.Chmod(w.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := m.save(w); err != nil {
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

// readGitFile reads a worktree's .git file: the worktree's own git
// directory.
func readGitFile(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", fmt.Errorf("worktree %s: %v", dir, err)
	}
	p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("worktree %s: its .git file names no git directory", dir)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p), nil
}

// isBeneath reports whether path is inside dir.
func isBeneath(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// repair undoes what a task may have done to how its worktree is tied to
// the repository: the .git file, the admin directory's commondir and
// gitdir files, HEAD on the task's branch; and makes the directories
// Writable names that a pack of the refs may have removed. The agent's
// own git calls never rely on these; the task's git does.
func (w *Workspace) repair() error {
	if isDir(w.Dir) {
		gitFile := filepath.Join(w.Dir, ".git")
		if info, err := os.Lstat(gitFile); err == nil && info.IsDir() {
			if err := removeTree(gitFile); err != nil {
				return err
			}
		}
		if err := os.WriteFile(gitFile+".tmp", []byte("gitdir: "+w.AdminDir+"\n"), 0o644); err != nil {
			return fmt.Errorf("worktree %s: %v", w.Dir, err)
		}
		if err := os.Rename(gitFile+".tmp", gitFile); err != nil {
			return fmt.Errorf("worktree %s: %v", w.Dir, err)
		}
	}
	if isDir(w.AdminDir) {
		for name, content := range map[string]string{
			"commondir": "../..\n",
			"gitdir":    filepath.Join(w.Dir, ".git") + "\n",
			"HEAD":      "ref: " + w.ref() + "\n",
		} {
			p := filepath.Join(w.AdminDir, name)
			if b, err := os.ReadFile(p); err == nil && string(b) == content {
				continue
			}
			if err := os.WriteFile(p+".tmp", []byte(content), 0o644); err != nil {
				return fmt.Errorf("worktree %s: %v", w.Dir, err)
			}
			if err := os.Rename(p+".tmp", p); err != nil {
				return fmt.Errorf("worktree %s: %v", w.Dir, err)
			}
		}
	}
	for _, d := range w.refDirs() {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return fmt.Errorf("repository %q: %v", w.Repo, err)
		}
	}
	return nil
}

// dropHalfMade removes what a Prepare cut short left of w (a crash
// between git worktree add and the record): its worktree, if its .git
// file is git's own for this repository, and its branch, which is still
// at the base. No attempt ran there (the record comes first), so nothing
// is lost. It reports whether it could.
func (m *Manager) dropHalfMade(ctx context.Context, w *Workspace) bool {
	if entries, err := os.ReadDir(w.Dir); err == nil && len(entries) > 0 {
		admin, err := readGitFile(w.Dir)
		if err != nil || !isBeneath(admin, filepath.Join(w.CommonDir, "worktrees")) {
			return false
		}
		if _, err := runGit(ctx, w.repoDirs(), "worktree", "remove", "--force", w.Dir); err != nil {
			return false
		}
	}
	_, _ = runGit(ctx, w.repoDirs(), "worktree", "prune")
	_, err := runGit(ctx, w.repoDirs(), "branch", "-D", "--end-of-options", w.Branch)
	return err == nil
}

// Get returns task taskID's workspace, or an error wrapping
// ErrNoWorkspace.
func (m *Manager) Get(taskID string) (*Workspace, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	return m.load(taskID)
}

// Reset brings task taskID's workspace back to its base, for a replay:
// the branch moved back to the base commit, the worktree and its index
// made to match it, and every file git does not track removed, ignored
// ones too.
func (m *Manager) Reset(ctx context.Context, taskID string) error {
	w, err := m.Get(taskID)
	if err != nil {
		return err
	}
	if err := w.repair(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"reset", "--quiet", "--hard", "--no-recurse-submodules", w.BaseCommit},
		{"clean", "-ffdxq"},
	} {
		if _, err := runGit(ctx, w.treeDirs(), args...); err != nil {
			return fmt.Errorf("workspace %s: %v", taskID, err)
		}
	}
	if w.LastHead != "" {
		// A replay starts over: what came before is not this task's work
		// any more (the runner said what it dropped).
		defer m.lock(w.CommonDir)()
		w.LastHead = ""
		return m.save(w)
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
	if w.TaskID != taskID || w.Dir != filepath.Join(m.root, taskID) || !isBeneath(w.AdminDir, filepath.Join(w.CommonDir, "worktrees")) {
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
