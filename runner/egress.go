package runner

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/state"
)

// Egress confines where attempts connect: each runs in a network namespace
// of its own, with nothing but loopback, and reaches its executor's model
// API, and the hosts Allow names, through a proxy its keeper serves (see
// internal/egress). A task's own list (state.Task.Egress) narrows Allow.
type Egress struct {
	// Allow are the hosts every attempt may reach besides its executor's
	// model API (agent run --egress-allow).
	Allow []egress.Rule
	// Always are reached whatever the task's own list says: the control
	// plane, for a task given a token for its subtasks.
	Always []egress.Rule
}

// policyFor is task's egress before its executor adds its model API: the
// agent's allow list, narrowed by the task's own. An entry of the task's
// that does not parse allows nothing.
func (e *Egress) policyFor(task *state.Task) *egress.Policy {
	p := egress.Policy{Allow: e.Allow}
	if task.EgressAllow != nil {
		own := []egress.Rule{}
		for _, s := range task.EgressAllow {
			if r, err := egress.ParseRule(s); err == nil {
				own = append(own, r)
			}
		}
		p = p.Narrow(own)
	}
	p = p.With(e.Always...)
	return &p
}

// EgressPolicy is where the attempt may connect, its executor's model API
// (endpoints) added to what the runner allows it; nil when its network is
// not confined.
func (s AttemptSpec) EgressPolicy(endpoints ...egress.Rule) *egress.Policy {
	if s.Egress == nil {
		return nil
	}
	p := s.Egress.With(endpoints...)
	return &p
}

// TaskUser is the user a root agent runs its tasks as (agent run
// --task-user): their work, temporary and session directories become
// theirs, and their executor gets the user's HOME, USER and LOGNAME.
type TaskUser struct {
	Name string
	Home string
	keeper.User
}

// LookupTaskUser finds name among the system's users. Root is no task
// user: a root agent's tasks run as root without capabilities unless
// another user is named.
func LookupTaskUser(name string) (*TaskUser, error) {
	u, err := lookupUser(name)
	if err != nil {
		return nil, fmt.Errorf("task user %q: %w", name, err)
	}
	if u.Uid == 0 {
		return nil, fmt.Errorf("task user %q is root: name an unprivileged user (useradd --system agent-task), or leave --task-user out to run tasks as root without capabilities", name)
	}
	return u, nil
}

// own gives paths, and what is under each, to the task user; a symbolic
// link is changed, never followed.
func (u *TaskUser) own(paths ...string) error {
	if u == nil {
		return nil
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, int(u.Uid), int(u.Gid))
		})
		if err != nil {
			return fmt.Errorf("give %s to task user %s: %w", p, u.Name, err)
		}
	}
	return nil
}

// Prepare makes the work root, and the temporary, session and serve
// directories in it, reachable by the task user (see reachable), so that the
// directories each task gets there (its own) open to it.
func (u *TaskUser) Prepare(workRoot, dataDir string) error {
	if u == nil || workRoot == "" {
		return nil
	}
	stop := workRoot
	if abs, err := filepath.Abs(workRoot); err == nil && dataDir != "" {
		if d, err := filepath.Abs(dataDir); err == nil && strings.HasPrefix(abs, d+string(filepath.Separator)) {
			stop = d
		}
	}
	for _, d := range []string{filepath.Join(workRoot, ".tmp"), filepath.Join(workRoot, SessionDirName), filepath.Join(workRoot, ServeDirName)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := u.reachable(d, stop); err != nil {
			return err
		}
	}
	return nil
}

// reachable makes dir searchable by the task user on the way to it: each
// directory from dir up to stop (the agent's own, which stay unlistable,
// 0711) gets the search bit for others; above stop, it checks that the
// user can pass, saying which directory it cannot.
func (u *TaskUser) reachable(dir, stop string) error {
	if u == nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	stop, _ = filepath.Abs(stop)
	for d := abs; ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return err
		}
		inside := stop != "" && (d == stop || strings.HasPrefix(d, stop+string(filepath.Separator)))
		if inside {
			if info.Mode().Perm()&0o011 != 0o011 {
				if err := os.Chmod(d, info.Mode().Perm()|0o011); err != nil {
					return fmt.Errorf("let task user %s reach %s: %w", u.Name, d, err)
				}
			}
		} else if !u.canSearch(info) {
			return fmt.Errorf("task user %s cannot reach %s: %s is not searchable by it (mode %04o); give --work-dir a directory it can reach", u.Name, abs, d, info.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// canSearch reports whether the user may pass through a directory.
func (u *TaskUser) canSearch(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := info.Mode().Perm()
	switch {
	case st.Uid == u.Uid:
		return perm&0o100 != 0
	case st.Gid == u.Gid || u.inGroup(st.Gid):
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

func (u *TaskUser) inGroup(gid uint32) bool {
	for _, g := range u.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// env sets the task user's HOME, USER and LOGNAME in env.
func (u *TaskUser) env(env []string) []string {
	if u == nil {
		return env
	}
	for _, kv := range []string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name} {
		env = setEnv(env, kv)
	}
	return env
}

// lookupUser finds a user by name, with the groups it is in.
func lookupUser(name string) (*TaskUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("uid %q, gid %q are not numbers", u.Uid, u.Gid)
	}
	tu := &TaskUser{Name: u.Username, Home: u.HomeDir, User: keeper.User{Uid: uint32(uid), Gid: uint32(gid)}}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			tu.Groups = append(tu.Groups, uint32(n))
		}
	}
	return tu, nil
}

// deniedRecord is what an attempt's proxy refused, as its record keeps it.
func deniedRecord(d *egress.Denied) *state.Egress {
	if d == nil {
		return nil
	}
	return &state.Egress{Denied: d.Count, Last: d.Last}
}

// deniedText says what an attempt's proxy refused, for its log.
func deniedText(e *state.Egress) string {
	return strconv.Itoa(e.Denied) + " connection(s) refused, not on the task's allow list: " + strings.Join(e.Last, ", ")
}
