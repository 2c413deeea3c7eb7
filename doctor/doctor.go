// Package doctor looks at what `agent run` would use, without running it:
// the settings, the token, the data directory (its rights, its lock, the
// outbox, the free space), the executor, the isolation and the control
// plane. Each check says what it found and, when something is wrong, how
// to fix it. It promises to change nothing: it creates no file, takes no
// lock a running agent holds, registers no agent and claims no task.
package doctor

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/workspace"
)

// CheckName names a check. The names are stable: scripts read them in
// `agent doctor --json`.
type CheckName string

// The checks, in the order Run runs them. CheckModels is there only when
// there is something to check: --models given, and a CLI that can list
// the models it knows without a request; CheckAgent only for an agent
// that says what it supports (ACP: opencode, acp).
const (
	CheckConfig       CheckName = "config"        // the settings resolved; the config file read
	CheckToken        CheckName = "token"         // a token given, its file private
	CheckDataDir      CheckName = "data-dir"      // exists or can be made, the user's, 0700
	CheckLock         CheckName = "lock"          // free, or held by the running agent
	CheckOutbox       CheckName = "outbox"        // readable, nothing corrupt, torn, dead or stale
	CheckDisk         CheckName = "disk"          // free space on the data directory's file system
	CheckExecutor     CheckName = "executor"      // found, executable, the tested version
	CheckAgent        CheckName = "agent"         // an ACP agent initialized: who it is, what it does not support
	CheckLogin        CheckName = "login"         // the executor's CLI has a credential: logged in, or its key set
	CheckModels       CheckName = "models"        // --models known to the CLI; only where it can tell offline (codex, opencode, an ACP agent's session)
	CheckIsolation    CheckName = "isolation"     // attempts confined (Landlock), or said why not
	CheckDenied       CheckName = "denied"        // what tasks cannot read: the agent's files, credentials present and absent
	CheckEgress       CheckName = "egress"        // attempts' network confined to their allow list, or said why not
	CheckTaskUser     CheckName = "task-user"     // who attempts run as: a root agent's without capabilities, or its --task-user
	CheckWorkspaces   CheckName = "workspaces"    // the repositories served are git repositories; what the tasks' clones take
	CheckControlPlane CheckName = "control-plane" // the URL valid, GET /healthz answers
	CheckAuth         CheckName = "auth"          // the control plane accepts the token
	CheckClock        CheckName = "clock"         // this clock agrees with the control plane's
)

// CheckResult is how a check came out.
type CheckResult string

// The results. Only a failure makes `agent doctor` exit 1.
const (
	CheckPass CheckResult = "pass"
	CheckWarn CheckResult = "warn" // works, but deserves a look
	CheckFail CheckResult = "fail" // agent run would fail or misbehave
	CheckSkip CheckResult = "skip" // not checked: what it needs failed first
)

// Check is one check's outcome: a one-line detail and, for a failure or a
// warning, a one-line fix. Its JSON form is what `agent doctor --json`
// prints; fields are added, never renamed.
type Check struct {
	Name   CheckName   `json:"check"`
	Result CheckResult `json:"result"`
	Detail string      `json:"detail"`
	Fix    string      `json:"fix,omitempty"`
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Result == CheckFail {
			return true
		}
	}
	return false
}

// Thresholds of the checks.
const (
	// DiskFailBytes: below this much free space the outbox's and the task
	// state's writes are about to fail.
	DiskFailBytes = 100 << 20
	// DiskWarnBytes and DiskWarnPercent: below either, the disk is filling.
	DiskWarnBytes   = 1 << 30
	DiskWarnPercent = 5
	// ClockWarnSkew and ClockFailSkew bound the difference between this
	// clock and the control plane's: leases, retry times and the ages of
	// records are compared across the two.
	ClockWarnSkew = 30 * time.Second
	ClockFailSkew = 5 * time.Minute
	// OutboxStaleAge: a pending record older than this is not being
	// delivered.
	OutboxStaleAge = time.Hour
	// DefaultTimeout bounds each request to the control plane and each
	// command of the executor's CLI (--version, its login status).
	DefaultTimeout = 10 * time.Second
)

// Options is what Run checks: the settings agent run would use,
// and what went wrong getting them. Zero fields take the defaults their
// comments give.
type Options struct {
	// ConfigFile is the config file read, "" for none; ConfigErr what was
	// wrong with the settings (the file, the environment or the flags),
	// nil when they resolved. The other fields then hold what could be
	// resolved without it.
	ConfigFile string
	ConfigErr  error

	// Token is the control plane's token, from TokenFile or, when that is
	// "", the environment (AGENT_TOKEN); TokenErr says why there is none.
	// The token is sent to the control plane alone, never shown.
	Token     string
	TokenFile string
	TokenErr  error

	DataDir string

	// ExecutorKind is the --executor setting (codex, claude, exec,
	// sample); Executor is the executor built from the settings, or nil
	// with ExecutorErr saying why it could not be.
	ExecutorKind string
	Executor     runner.Executor
	ExecutorErr  error
	// Models is the --models setting: the models the attempts ask for.
	Models []string

	// Isolation is how attempts are to be confined.
	Isolation isolation.Config

	// Repos are the repositories the agent is to serve; WorkDir is where
	// the tasks' work directories, and so their clones, are (default
	// DataDir/work).
	Repos   []workspace.Repo
	WorkDir string

	ControlPlane string
	Insecure     bool
	// Version is the agent's version, sent as its User-Agent.
	Version string

	// Timeout bounds each request to the control plane and each command
	// of the executor's CLI. Default DefaultTimeout.
	Timeout time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Run runs every check, in the order of the CheckName constants, and
// returns their outcomes. A check whose prerequisite failed is skipped.
func Run(ctx context.Context, o Options) []Check {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	checks := []Check{checkConfig(o), checkToken(o)}
	checks = append(checks, checkDataDir(o)...)
	exe := checkExecutor(ctx, o)
	checks = append(checks, exe)
	if c, ok := checkAgent(ctx, o, exe); ok {
		checks = append(checks, c)
	}
	checks = append(checks, checkLogin(ctx, o, exe))
	if c, ok := checkModels(ctx, o, exe); ok {
		checks = append(checks, c)
	}
	checks = append(checks, checkIsolation(o)...)
	checks = append(checks, checkEgress(o), checkTaskUser(o), checkWorkspaces(ctx, o))
	return append(checks, checkControlPlane(ctx, o)...)
}

// checkIsolation says how agent run would confine attempts: a pass with
// Landlock, a warning without (a kernel without it, or isolation none), a
// failure where isolation landlock is asked of a kernel without it, or an
// isolation-allow lifts what it may not; then what tasks are denied.
func checkIsolation(o Options) []Check {
	c, err := isolation.ResolveFiles(o.Isolation, o.DataDir, o.WorkDir)
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "isolation-allow "):
		return []Check{failed(CheckIsolation, err.Error(),
			"drop that --isolation-allow (isolation.allow): only an entry of the default deny list, or a path inside one, can be allowed"),
			skip(CheckDenied, "the isolation settings are invalid")}
	case err != nil:
		return []Check{failed(CheckIsolation, err.Error(),
			"run on Linux 5.13 or later with Landlock enabled (add landlock to the kernel's lsm= boot parameter), or set --isolation auto (isolation.mode) to run unconfined where it cannot"),
			skip(CheckDenied, "attempts cannot be confined")}
	case c.Runner == nil && o.Isolation.Mode == isolation.None:
		return []Check{{Name: CheckIsolation, Result: CheckWarn, Detail: c.Line,
			Fix: "drop --isolation none (isolation.mode in the config) so that attempts are confined to their work directory"},
			skip(CheckDenied, "attempts are not confined: tasks read all this user can")}
	case c.Runner == nil:
		return []Check{{Name: CheckIsolation, Result: CheckWarn, Detail: c.Line,
			Fix: "attempts run unconfined, able to write wherever this user may: run on Linux 5.13 or later with Landlock enabled (add landlock to the kernel's lsm= boot parameter), or as a user who may write little"},
			skip(CheckDenied, "attempts are not confined: tasks read all this user can")}
	}
	return []Check{pass(CheckIsolation, "%s", c.Line), checkDenied(c.Denied)}
}

// checkDenied lists, compactly, what tasks are denied: the agent's own
// paths, then the credentials of the default list that exist now; those
// that do not are counted (denied all the same, once made).
func checkDenied(denied []isolation.Denied) Check {
	home, _ := os.UserHomeDir()
	short := func(p string) string {
		if rest, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok && home != "" {
			return "~/" + rest
		}
		return p
	}
	var own, present []string
	absent := 0
	for _, d := range denied {
		switch {
		case !d.Credential && strings.HasPrefix(d.Why, "a control plane's"):
			own = append(own, short(d.Path)+" (a control plane's state)")
		case !d.Credential && d.Why == "isolation-deny":
			own = append(own, short(d.Path)+" (isolation-deny)")
		case !d.Credential:
			own = append(own, short(d.Path))
		case d.Exists:
			present = append(present, short(d.Path))
		default:
			absent++
		}
	}
	creds := "none present"
	if len(present) > 0 {
		creds = strings.Join(present, ", ")
	}
	return pass(CheckDenied, "to tasks: the agent's %s; credentials: %s; %d more absent, denied if made (--isolation-allow lifts one)",
		strings.Join(own, ", "), creds, absent)
}

// checkEgress says how agent run would confine attempts' network: a pass
// with a network namespace per attempt, a warning without (a kernel or
// container that does not let it make one, or egress open), a failure
// where egress allowlist is asked of one that does not, or an allow list
// entry is wrong.
func checkEgress(o Options) Check {
	e, line, err := isolation.ResolveEgress(o.Isolation)
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "egress allowlist:"):
		return failed(CheckEgress, err.Error(),
			"run where this user may make user and network namespaces (sysctl user.max_user_namespaces > 0; not in a container that refuses them), or set --egress auto (egress) to run with the machine's network where it cannot")
	case err != nil:
		return failed(CheckEgress, err.Error(), "correct --egress or --egress-allow (egress, egress-allow in the config file): --egress auto, allowlist or open; --egress-allow HOST or HOST:PORT, repeatable")
	case e == nil && o.Isolation.Egress == isolation.EgressOpen:
		return Check{Name: CheckEgress, Result: CheckWarn, Detail: line,
			Fix: "drop --egress open (egress in the config) so that tasks reach their model API and the hosts --egress-allow names, and nothing else"}
	case e == nil:
		return Check{Name: CheckEgress, Result: CheckWarn, Detail: line,
			Fix: "let this user make user and network namespaces (sysctl -w user.max_user_namespaces=10000; on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0), or run the agent where it may"}
	}
	return pass(CheckEgress, "%s", line)
}

// checkTaskUser says who attempts run as: this user; a root agent's
// --task-user, or root without capabilities; a warning where a root
// agent's attempts keep root's capabilities (they run unconfined).
func checkTaskUser(o Options) Check {
	files, _ := isolation.ResolveFiles(o.Isolation, o.DataDir, "")
	e, _, _ := isolation.ResolveEgress(o.Isolation)
	_, line, warn, err := isolation.ResolveUser(o.Isolation, files.Runner != nil || e != nil)
	switch {
	case err != nil:
		return failed(CheckTaskUser, err.Error(), "name an existing unprivileged user with --task-user (useradd --system --create-home agent-task), and run the agent as root to use it; or leave --task-user out")
	case warn:
		return Check{Name: CheckTaskUser, Result: CheckWarn, Detail: line,
			Fix: "confine attempts (--isolation auto, --egress auto) and name an unprivileged --task-user, or run the agent as a user of its own"}
	case line == "":
		line = "tasks run as this user (uid " + strconv.Itoa(os.Geteuid()) + "), as the agent does"
	}
	return pass(CheckTaskUser, "%s", line)
}

// checkWorkspaces checks the repositories the agent is to serve as agent
// run would (a repository a confined task could write is refused), that
// this user may write the work directory and each repository's git
// directory (the agent brings each task's branch and commits back
// there), and says what the tasks' clones take: a warning when some are
// kept because removing them would lose work. Its git calls only read.
func checkWorkspaces(ctx context.Context, o Options) Check {
	root := o.WorkDir
	if root == "" {
		root = filepath.Join(o.DataDir, "work")
	}
	m, err := workspace.New(root, o.Repos)
	if err != nil {
		return failed(CheckWorkspaces, err.Error(), "correct the [[repo]] named (name, and path to a git checkout) in the config, or its --repo NAME=PATH")
	}
	if c, err := isolation.Resolve(o.Isolation, o.DataDir, o.WorkDir); err == nil && c.Runner != nil {
		if err := m.CheckOutOfReach(c.Runner.TaskWritable(), c.Runner.Deny); err != nil {
			return failed(CheckWorkspaces, err.Error(), "keep served repositories where tasks cannot write: not in /tmp, /dev or an --isolation-write hierarchy")
		}
	}
	serves := "no repository served ([[repo]] in the config)"
	if names := m.Names(); len(names) > 0 {
		serves = "serves " + strings.Join(names, ", ")
	}
	if err := m.CheckWritable(); err != nil {
		return failed(CheckWorkspaces, strings.ReplaceAll(err.Error(), "\n", "; "),
			"run the agent as the user who owns them, or give that user write access (chown -R USER DIR); a work directory of your own is --work-dir")
	}
	list, err := m.List(ctx)
	if err != nil {
		return Check{Name: CheckWorkspaces, Result: CheckWarn, Detail: serves + "; " + err.Error(), Fix: "look at the records named; agent workspaces ls lists the others"}
	}
	if len(list) == 0 {
		return pass(CheckWorkspaces, "%s; no workspaces in %s", serves, root)
	}
	var bytes int64
	kept := 0
	for _, i := range list {
		bytes += i.Bytes
		if i.Kept() {
			kept++
		}
	}
	noun := "workspaces"
	if len(list) == 1 {
		noun = "workspace"
	}
	detail := fmt.Sprintf("%s; %d %s taking %s in %s", serves, len(list), noun, bytesize.Text(bytes), root)
	if kept > 0 {
		return Check{Name: CheckWorkspaces, Result: CheckWarn, Detail: fmt.Sprintf("%s; %d kept, holding work retention will not remove", detail, kept),
			Fix: "agent workspaces ls shows them: merge or push what you want of their branches, then agent workspaces rm TASK_ID"}
	}
	return pass(CheckWorkspaces, "%s", detail)
}

func pass(name CheckName, format string, args ...any) Check {
	return Check{Name: name, Result: CheckPass, Detail: fmt.Sprintf(format, args...)}
}

func skip(name CheckName, why string) Check {
	return Check{Name: name, Result: CheckSkip, Detail: why}
}

func failed(name CheckName, detail, fix string) Check {
	return Check{Name: name, Result: CheckFail, Detail: detail, Fix: fix}
}

func checkConfig(o Options) Check {
	if o.ConfigErr != nil {
		detail := o.ConfigErr.Error()
		fix := "correct the setting named (agent run --help lists them); the checks below use what could be resolved"
		if _, err := os.Stat(o.ConfigFile); o.ConfigFile != "" && err != nil {
			fix = "give --config (or AGENT_CONFIG) a file you can read, or set AGENT_CONFIG= for none; the checks below use flags, environment and defaults"
		} else if o.ConfigFile != "" && strings.Contains(detail, o.ConfigFile) {
			fix = fmt.Sprintf("edit %s at the line named (agent config check %s checks it); the checks below use flags, environment and defaults", o.ConfigFile, o.ConfigFile)
		}
		return failed(CheckConfig, detail, fix)
	}
	if o.ConfigFile == "" {
		return pass(CheckConfig, "no config file: flags, environment and defaults")
	}
	return pass(CheckConfig, "%s read, every key known and every value valid", o.ConfigFile)
}

func checkToken(o Options) Check {
	if o.TokenErr != nil {
		fix := "give --token-file FILE (token-file in the config file) or set AGENT_TOKEN to the control plane's token"
		if o.TokenFile != "" {
			fix = fmt.Sprintf("put the control plane's token, one line, in %s (chmod 600 %s), or give another --token-file", o.TokenFile, o.TokenFile)
		}
		return failed(CheckToken, o.TokenErr.Error(), fix)
	}
	if o.TokenFile == "" {
		return pass(CheckToken, "from AGENT_TOKEN (not shown)")
	}
	info, err := os.Stat(o.TokenFile)
	if err != nil {
		return failed(CheckToken, fmt.Sprintf("token file: %v", err), "give --token-file a file you can read")
	}
	perm := info.Mode().Perm()
	fix := fmt.Sprintf("chmod 600 %s", o.TokenFile)
	switch {
	case perm&0o007 != 0:
		return failed(CheckToken, fmt.Sprintf("token file %s is readable by every user (mode %04o): anyone on this machine can take the token", o.TokenFile, perm), fix)
	case perm&0o070 != 0:
		return failed(CheckToken, fmt.Sprintf("token file %s is open to its group (mode %04o): agent run refuses it", o.TokenFile, perm), fix)
	}
	return pass(CheckToken, "from %s (mode %04o, not shown)", o.TokenFile, perm)
}

// checkDataDir checks the data directory and what is in it: its rights,
// the lock, the outbox and the free space.
func checkDataDir(o Options) []Check {
	dir := o.DataDir
	info, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		parent := existingAncestor(dir)
		if unix.Access(parent, unix.W_OK|unix.X_OK) != nil {
			return []Check{failed(CheckDataDir, fmt.Sprintf("%s does not exist, and %s is not writable to make it", dir, parent),
				fmt.Sprintf("mkdir -m 700 %s as a user who may, and give it to yours; or give --data-dir a directory of your own", dir)),
				skip(CheckLock, "no data directory"), skip(CheckOutbox, "no data directory"), checkDisk(parent)}
		}
		const none = "no data directory yet"
		return []Check{pass(CheckDataDir, "%s does not exist yet; agent run makes it (0700)", dir),
			pass(CheckLock, "free (%s)", none), pass(CheckOutbox, "none yet (%s)", none), checkDisk(parent)}
	case err != nil:
		return []Check{failed(CheckDataDir, fmt.Sprintf("data directory: %v", err), "give --data-dir a directory of your own"),
			skip(CheckLock, "data directory unreadable"), skip(CheckOutbox, "data directory unreadable"), checkDisk(existingAncestor(dir))}
	}
	c := checkDirRights(dir, info)
	if !info.IsDir() {
		return []Check{c, skip(CheckLock, "not a directory"), skip(CheckOutbox, "not a directory"), checkDisk(filepath.Dir(dir))}
	}
	lock, running := checkLock(dir)
	return []Check{c, lock, checkOutbox(dir, running, o.Now()), checkDisk(dir)}
}

// existingAncestor is the nearest directory above dir that exists.
func existingAncestor(dir string) string {
	p, _ := filepath.Abs(dir)
	for {
		if _, err := os.Stat(p); err == nil || filepath.Dir(p) == p {
			return p
		}
		p = filepath.Dir(p)
	}
}

// checkDirRights: the data directory must be private (checkPrivate, which
// agent run enforces) and closed to others' reading too: it holds the
// tasks' prompts, the executors' output and the agent's own token.
func checkDirRights(dir string, info fs.FileInfo) Check {
	chmod := fmt.Sprintf("chmod 700 %s", dir)
	if err := datadir.CheckPrivate(dir); err != nil {
		fix := chmod
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
			fix = "give --data-dir a directory of your own, or chown it to you"
		} else if !info.IsDir() {
			fix = "give --data-dir a directory (a symbolic link is refused)"
		}
		return failed(CheckDataDir, err.Error(), fix)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return failed(CheckDataDir, fmt.Sprintf("data directory %s is open to others (mode %04o); agent run makes it 0700: what it holds is private", dir, perm), chmod)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return failed(CheckDataDir, fmt.Sprintf("data directory %s is not writable: %v", dir, err), chmod)
	}
	return pass(CheckDataDir, "%s (mode 0700, yours)", dir)
}

// checkLock says whether an agent runs on dir. It learns that as agent
// stop does: a lock a running agent holds is only tried, never taken.
func checkLock(dir string) (c Check, running bool) {
	h, err := datadir.Running(dir)
	switch {
	case err == nil:
		return pass(CheckLock, "held: agent running, pid %d", h.PID), true
	case errors.Is(err, datadir.ErrNotRunning):
		return pass(CheckLock, "free: no agent running"), false
	}
	lockPath := datadir.Layout{Dir: dir}.Lock()
	return Check{Name: CheckLock, Result: CheckWarn, Detail: err.Error(),
		Fix: fmt.Sprintf("find what holds %s (fuser -v %s); agent stop stops an agent", lockPath, lockPath)}, true
}

// checkOutbox reads the outbox as `agent outbox stats` does, without its
// lock. A torn tail is told only while no agent runs: a running one may be
// writing that line.
func checkOutbox(dir string, running bool, now time.Time) Check {
	obDir := datadir.Layout{Dir: dir}.Outbox()
	snap, err := outbox.Inspect(obDir)
	if errors.Is(err, outbox.ErrNoOutbox) {
		return pass(CheckOutbox, "none yet: agent run makes it")
	}
	if err != nil {
		return failed(CheckOutbox, err.Error(), fmt.Sprintf("make %s a directory of yours that you can read (chmod 700)", obDir))
	}
	st := snap.Stats
	detail := fmt.Sprintf("%d pending, %d dead, %s", st.Pending, st.Dead, bytesize.Text(st.FileBytes))
	if !st.OldestPending.IsZero() {
		detail = fmt.Sprintf("%d pending (oldest %s old), %d dead, %s", st.Pending, now.Sub(st.OldestPending).Round(time.Second), st.Dead, bytesize.Text(st.FileBytes))
	}
	var problems, fixes []string
	if st.Quarantined > 0 {
		problems = append(problems, fmt.Sprintf("%d corrupt lines", st.Quarantined))
		fixes = append(fixes, "start the agent: it sets corrupt lines aside in "+outbox.QuarantineName)
	}
	if !running && st.TornBytes > 0 { // not the zeroed stretch a crash leaves: Open cuts that quietly
		problems = append(problems, fmt.Sprintf("%d torn bytes at the end (a crash)", st.TornBytes))
		fixes = append(fixes, "start the agent: it cuts the torn tail")
	}
	if n := countLines(filepath.Join(obDir, outbox.QuarantineName)); n > 0 {
		q := filepath.Join(obDir, outbox.QuarantineName)
		problems = append(problems, fmt.Sprintf("%d quarantined lines in %s", n, q))
		fixes = append(fixes, "look at "+q+", then remove it")
	}
	if st.Dead > 0 {
		problems = append(problems, fmt.Sprintf("%d dead records (the control plane refused them)", st.Dead))
		fixes = append(fixes, "agent outbox ls --dead says why; agent outbox purge --dead removes them")
	}
	if !st.OldestPending.IsZero() && now.Sub(st.OldestPending) > OutboxStaleAge {
		problems = append(problems, fmt.Sprintf("records pending for more than %s", OutboxStaleAge))
		if running {
			fixes = append(fixes, "the agent cannot deliver: see the control-plane and auth checks")
		} else {
			fixes = append(fixes, "start the agent (or agent outbox replay) to deliver them")
		}
	}
	if len(problems) == 0 {
		return pass(CheckOutbox, "%s", detail)
	}
	return Check{Name: CheckOutbox, Result: CheckWarn, Detail: detail + "; " + strings.Join(problems, "; "), Fix: strings.Join(fixes, "; ")}
}

// countLines counts the lines of a file, 0 when it is missing.
func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	r := bufio.NewReader(f)
	for {
		_, err := r.ReadSlice('\n')
		if err == nil {
			n++
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return n
	}
}

// freeSpaceResult classifies free space on a file system of total bytes.
func freeSpaceResult(free, total int64) CheckResult {
	switch {
	case free < DiskFailBytes:
		return CheckFail
	case free < DiskWarnBytes, total > 0 && free*100 < total*DiskWarnPercent:
		return CheckWarn
	}
	return CheckPass
}

func checkDisk(path string) Check {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Check{Name: CheckDisk, Result: CheckWarn, Detail: fmt.Sprintf("cannot tell the free space of %s: %v", path, err)}
	}
	free, total := int64(st.Bavail)*int64(st.Bsize), int64(st.Blocks)*int64(st.Bsize)
	pct := 0.0
	if total > 0 {
		pct = float64(free) * 100 / float64(total)
	}
	c := Check{Name: CheckDisk, Result: freeSpaceResult(free, total),
		Detail: fmt.Sprintf("%s free of %s (%.0f%%) on the file system of %s", bytesize.Text(free), bytesize.Text(total), pct, path)}
	switch c.Result {
	case CheckFail:
		c.Fix = fmt.Sprintf("free space there: below %s the outbox and task state cannot be written (a shorter --retention keeps less)", bytesize.Text(DiskFailBytes))
	case CheckWarn:
		c.Fix = fmt.Sprintf("free space there before it runs out (below %s or %d%% is low; a shorter --retention keeps less)", bytesize.Text(DiskWarnBytes), DiskWarnPercent)
	}
	return c
}

func checkExecutor(ctx context.Context, o Options) Check {
	if o.ExecutorErr != nil || o.Executor == nil {
		detail := "no executor"
		if o.ExecutorErr != nil {
			detail = o.ExecutorErr.Error()
		}
		return failed(CheckExecutor, detail, "correct the executor's settings: --executor, --executor-command, --executor-bin (agent run --help)")
	}
	e := o.Executor
	tested, isCLI := cli.Tested[o.ExecutorKind]
	install := "install it, or give --executor-command a command on PATH or with its absolute path"
	if isCLI {
		install = fmt.Sprintf("npm install -g %s@%s, or give --executor-bin its path", tested.Package, tested.Version)
	}
	if err := e.Probe(ctx); err != nil {
		fix := install
		if errors.Is(err, runner.ErrNotExecutable) {
			fix = "make it executable (chmod +x), or point at the right file"
		}
		return failed(CheckExecutor, err.Error(), fix)
	}
	vctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	path, version, err := cli.Version(vctx, e)
	switch {
	case errors.Is(err, cli.ErrNoVersion):
		return pass(CheckExecutor, "%s: %s", o.ExecutorKind, runner.Describe(e))
	case err != nil:
		return Check{Name: CheckExecutor, Result: CheckWarn, Detail: fmt.Sprintf("%s found, but its version cannot be told: %v", o.ExecutorKind, err),
			Fix: fmt.Sprintf("run %s --version by hand to see why", path)}
	case isCLI && version != tested.Version:
		return Check{Name: CheckExecutor, Result: CheckWarn,
			Detail: fmt.Sprintf("%s %s (%s); the agent is tested against %s", o.ExecutorKind, version, path, tested.Version),
			Fix:    fmt.Sprintf("npm install -g %s@%s to run the tested release", tested.Package, tested.Version)}
	}
	return pass(CheckExecutor, "%s %s (%s)", o.ExecutorKind, version, path)
}

// checkControlPlane checks the URL, GET /healthz, the token, and this
// clock against the Date of the control plane's answer.
func checkControlPlane(ctx context.Context, o Options) []Check {
	rest := func(why string) []Check { return []Check{skip(CheckAuth, why), skip(CheckClock, why)} }
	if o.ControlPlane == "" {
		return append([]Check{failed(CheckControlPlane, "no control plane URL given",
			"give --control-plane URL (control-plane in the config file, or AGENT_CONTROL_PLANE)")}, rest("no control plane")...)
	}
	u, err := controlplane.CheckURL(o.ControlPlane, o.Insecure)
	if err != nil {
		return append([]Check{failed(CheckControlPlane, err.Error(), "correct --control-plane (control-plane in the config file)")}, rest("no valid control plane URL")...)
	}
	base := u.String()
	healthz, err := getHealthz(ctx, base+"/healthz", o)
	if err != nil {
		fix := "start the control plane, or check the URL, the network and any firewall between"
		if cve := (*tls.CertificateVerificationError)(nil); errors.As(err, &cve) {
			fix = "this machine does not trust the control plane's certificate: add its CA to the system's trust store"
		}
		return append([]Check{failed(CheckControlPlane, fmt.Sprintf("cannot reach %s: %v", u.Redacted(), err), fix)}, rest("control plane unreachable")...)
	}
	cp := pass(CheckControlPlane, "%s: GET /healthz answered %d in %s", u.Redacted(), healthz.status, healthz.took.Round(time.Millisecond))
	switch {
	case healthz.status/100 == 3:
		cp = failed(CheckControlPlane, fmt.Sprintf("%s: GET /healthz answered %d, a redirect to %s; the agent follows none (its token would go along)",
			u.Redacted(), healthz.status, healthz.location), "give --control-plane the final URL")
	case healthz.status != http.StatusOK:
		cp = failed(CheckControlPlane, fmt.Sprintf("%s: GET /healthz answered %d %s", u.Redacted(), healthz.status, http.StatusText(healthz.status)),
			"is that the control plane? Check the URL and its logs")
	}
	return []Check{cp, checkAuth(ctx, base, o), clockCheck(healthz)}
}

// healthzAnswer is what GET /healthz said, and when.
type healthzAnswer struct {
	status   int
	location string
	took     time.Duration
	// date is the answer's Date header (zero when none); mid, the local
	// time halfway through the request.
	date, mid time.Time
}

// getHealthz asks target without the token (/healthz needs none) and follows
// no redirect.
func getHealthz(ctx context.Context, target string, o Options) (healthzAnswer, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return healthzAnswer{}, err
	}
	req.Header.Set("User-Agent", "agent/"+o.Version)
	sent := o.Now()
	resp, err := client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return healthzAnswer{}, ue.Err // the caller names the URL
	}
	if err != nil {
		return healthzAnswer{}, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	got := o.Now()
	a := healthzAnswer{status: resp.StatusCode, location: resp.Header.Get("Location"), took: got.Sub(sent), mid: sent.Add(got.Sub(sent) / 2)}
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		a.date = d
	}
	return a, nil
}

// checkAuth makes one read-only request with the token, GET /v1/whoami:
// agent run needs the registration secret its agent enrols with, not a
// person's token.
func checkAuth(ctx context.Context, base string, o Options) Check {
	if o.Token == "" {
		return skip(CheckAuth, "no token to try")
	}
	c, err := controlplane.NewClient(base, o.Token, controlplane.ClientOptions{Insecure: o.Insecure, Timeout: o.Timeout, Tries: 1, UserAgent: "agent/" + o.Version})
	if err != nil {
		return failed(CheckAuth, err.Error(), "correct --control-plane and the token")
	}
	// The fix points at the registration secret's own file: the file
	// given may be a person's operator token, which must not be written
	// over.
	from := "AGENT_TOKEN"
	secret := "the control plane's registration secret (agent controlplane serve prints the file that holds it: its --token-file, or DATA_DIR/token; not DATA_DIR/operator-token, a person's)"
	fix := "set AGENT_TOKEN to " + secret
	if o.TokenFile != "" {
		from = o.TokenFile
		fix = "give --token-file the file of " + secret
	}
	who, err := c.WhoAmI(ctx)
	var ae *controlplane.APIError
	switch {
	case errors.Is(err, controlplane.ErrUnauthorized):
		return failed(CheckAuth, fmt.Sprintf("the control plane refused the token from %s (401 Unauthorized)", from), fix)
	case errors.As(err, &ae) && ae.Status == http.StatusForbidden:
		return failed(CheckAuth, fmt.Sprintf("the control plane knows the token from %s but forbids it (403 Forbidden): %s", from, ae.Message), fix)
	case errors.As(err, &ae):
		return failed(CheckAuth, err.Error(), "see the control plane's logs for why it refused GET /v1/whoami")
	case err != nil:
		return failed(CheckAuth, fmt.Sprintf("could not ask the control plane whether it accepts the token: %v", err),
			"the control plane stopped answering: check that it runs, and the network between")
	case who.Principal != api.PrincipalRegistration:
		return failed(CheckAuth, fmt.Sprintf("token accepted, but it is an %s token, not the registration secret an agent enrols with", who.Principal),
			"keep "+from+" for what it is; "+fix)
	}
	return pass(CheckAuth, "the token from %s accepted: the registration secret (GET /v1/whoami)", from)
}

// clockResult classifies the difference between this clock and the
// control plane's.
func clockResult(skew time.Duration) CheckResult {
	skew = skew.Abs()
	switch {
	case skew > ClockFailSkew:
		return CheckFail
	case skew > ClockWarnSkew:
		return CheckWarn
	}
	return CheckPass
}

// clockCheck compares the Date of the control plane's answer with this
// clock halfway through the request. Date has whole seconds, cut down: the
// control plane's time was in [date, date+1s), and the skew is the least
// that agrees with it.
func clockCheck(a healthzAnswer) Check {
	if a.date.IsZero() {
		return Check{Name: CheckClock, Result: CheckWarn, Detail: "the control plane's answer has no Date header: the clocks cannot be compared",
			Fix: "a proxy in between may drop it; check this clock with NTP (timedatectl status)"}
	}
	var skew time.Duration
	switch {
	case a.mid.Before(a.date):
		skew = a.mid.Sub(a.date)
	case a.mid.After(a.date.Add(time.Second)):
		skew = a.mid.Sub(a.date.Add(time.Second))
	}
	skew = skew.Round(time.Second)
	detail := "within 1s of the control plane's"
	switch {
	case skew > 0:
		detail = fmt.Sprintf("%s ahead of the control plane's", skew)
	case skew < 0:
		detail = fmt.Sprintf("%s behind the control plane's", -skew)
	}
	c := Check{Name: CheckClock, Result: clockResult(skew), Detail: "this clock is " + detail}
	if c.Result != CheckPass {
		c.Fix = fmt.Sprintf("synchronize this clock (timedatectl set-ntp true, or your NTP client); beyond %s leases and retry times go wrong", ClockFailSkew)
	}
	return c
}
