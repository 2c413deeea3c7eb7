// Package isolation says how the agent confines its attempts, and resolves
// that on this kernel. It is the one definition both the daemon (which
// confines attempts as Resolve says) and the doctor (which reports what
// the daemon would do) use: a task reads what the agent's user can read
// but the agent's own files, and writes only its work directory, its
// temporary directory, /tmp, /dev and its CLI's state (see
// runner.Isolation).
package isolation

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/runner"
)

// Mode says whether the agent confines its attempts.
type Mode string

// The modes.
const (
	// Auto confines attempts where the kernel has Landlock, and says
	// loudly (log, health reason, heartbeat) where it has none.
	Auto Mode = "auto"
	// Landlock confines attempts, or the agent does not start.
	Landlock Mode = "landlock"
	// None runs attempts unconfined, on the operator's word; it is said
	// as loudly as a kernel without Landlock.
	None Mode = "none"
)

// Modes lists the modes, for flags and errors.
var Modes = []Mode{Auto, Landlock, None}

// Config configures how attempts are confined. The zero value is auto.
type Config struct {
	// Mode is auto, landlock or none. Default auto.
	Mode Mode
	// Protect are the agent's files outside its data directory: the
	// config file and every token file it knows of, and other agents'
	// data directories. The data directory always is. A token file's
	// directory that is, or looks like, a control plane's state directory
	// is protected whole.
	Protect []string
	// ControlPlaneDirs are directories a control plane on this host may
	// keep its state in (its --data-dir as the environment names it):
	// each is protected when it looks like one.
	ControlPlaneDirs []string
	// Deny are more paths no task may read or write (/srv/secrets, say).
	Deny []string
	// Allow lifts entries of DefaultDeny (a path the list names), or lets
	// tasks read a path inside one (a deploy key in ~/.ssh). It never
	// lifts the agent's own files or Deny.
	Allow []string
	// Write are more hierarchies tasks may write (a build cache, say).
	Write []string
	// Egress is how far attempts reach on the network: auto, allowlist
	// or open (see EgressMode). Default auto.
	Egress EgressMode
	// EgressAllow are hosts (HOST[:PORT]) every attempt may reach besides
	// its executor's model API.
	EgressAllow []string
	// TaskUser names the user a root agent's tasks run as; empty: root,
	// without capabilities.
	TaskUser string
	// Home is whose credentials DefaultDeny names; "" for the agent
	// user's.
	Home string
}

// Confinement is how attempts are confined, as resolved on this kernel:
// the runner's isolation (nil when unconfined), a line saying which, for
// logs, health and doctor, and what tasks are denied; the same for their
// network (Egress nil: not confined) and the user they run as.
type Confinement struct {
	Runner *runner.Isolation
	Line   string
	// Denied is every path tasks are denied, the agent's own first; nil
	// when attempts are not confined.
	Denied []Denied

	Egress     *runner.Egress
	EgressLine string

	TaskUser *runner.TaskUser
	// UserLine says who tasks run as; UserWarn, that they run as root
	// with root's capabilities (an unconfined root agent).
	UserLine string
	UserWarn bool
}

// Denied is a path tasks are denied, and why.
type Denied struct {
	Path string `json:"path"`
	Why  string `json:"why"`
	// Credential is set for an entry of DefaultDeny (Config.Allow can
	// lift it).
	Credential bool `json:"credential,omitempty"`
	// Exists says whether it exists now: one that does not is denied
	// all the same once it is made.
	Exists bool `json:"exists"`
}

// unconfinedRisk is what a task can do where attempts are not confined.
const unconfinedRisk = "a task can read the agent's token and change its files and config"

// Resolve resolves the isolation c asks for on this kernel, for an agent
// whose data directory is dataDir and work root workDir ("" for the one
// inside the data directory): both are out of every task's reach, with
// the agent's other files, a control plane's state directory the agent
// knows of, the person's credentials (DefaultDeny, less c.Allow) and
// c.Deny. It fails on a mode it does not know, on an allowed path that is
// not the default list's to lift, on landlock where the kernel cannot
// confine, on egress allowlist where it cannot make a network namespace,
// and on a task user it cannot have.
func Resolve(c Config, dataDir, workDir string) (Confinement, error) {
	conf, err := ResolveFiles(c, dataDir, workDir)
	if err != nil {
		return conf, err
	}
	if conf.Egress, conf.EgressLine, err = ResolveEgress(c); err != nil {
		return conf, err
	}
	if conf.TaskUser, conf.UserLine, conf.UserWarn, err = ResolveUser(c, conf.Runner != nil || conf.Egress != nil); err != nil {
		return conf, err
	}
	return conf, nil
}

// Confined reports whether attempts are confined in every way the agent
// knows: their files, their network, and (of a root agent) their
// capabilities. What is not is said in Summary.
func (c Confinement) Confined() bool { return c.Runner != nil && c.Egress != nil && !c.UserWarn }

// Summary is every line of the confinement, for health and the log: files,
// network, user.
func (c Confinement) Summary() string {
	s := c.Line
	for _, l := range []string{c.EgressLine, c.UserLine} {
		if l != "" {
			s += "; " + l
		}
	}
	return s
}

// ResolveFiles resolves how attempts' files are confined (Landlock), as
// Resolve does: Runner and Line.
func ResolveFiles(c Config, dataDir, workDir string) (Confinement, error) {
	switch c.Mode {
	case "", Auto, Landlock, None:
	default:
		return Confinement{}, fmt.Errorf("isolation %q: want auto, landlock or none", c.Mode)
	}
	d, err := deniedOf(c, dataDir, workDir)
	if err != nil {
		return Confinement{}, err
	}
	if c.Mode == None {
		return Confinement{Line: "none (isolation none): " + unconfinedRisk}, nil
	}
	why := ""
	abi, err := landlock.Probe()
	switch {
	case runtime.GOOS != "linux":
		why = "Landlock is Linux's"
	case !keeper.Supported():
		why = "this program does not run attempts under a keeper"
	case err != nil:
		why = err.Error()
	}
	if why != "" {
		if c.Mode == Landlock {
			return Confinement{}, fmt.Errorf("isolation landlock: %s", why)
		}
		return Confinement{Line: "none: " + why + "; " + unconfinedRisk}, nil
	}
	iso := &runner.Isolation{Write: c.Write, Allow: d.allow}
	for _, p := range d.list {
		if p.Credential {
			iso.Credentials = append(iso.Credentials, p.Path)
		} else {
			iso.Deny = append(iso.Deny, p.Path)
		}
	}
	return Confinement{Runner: iso, Denied: d.list,
		Line: fmt.Sprintf("landlock (ABI %d): tasks read all but the agent's files and %d credential paths, and write only their work directory, temporary directories, /dev and their CLI's state", abi, len(iso.Credentials))}, nil
}

// denial is what Resolve denies, and the read grants Allow makes inside it.
type denial struct {
	list  []Denied
	allow []string
}

// deniedOf lists what c denies tasks: the agent's own files, a control
// plane's state directory, c.Deny, then the credentials c.Allow leaves.
func deniedOf(c Config, dataDir, workDir string) (denial, error) {
	var d denial
	add := func(path, why string, credential bool) {
		if path == "" {
			return
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		for _, e := range d.list {
			if e.Path == path {
				return
			}
		}
		_, err := os.Lstat(path)
		d.list = append(d.list, Denied{Path: path, Why: why, Credential: credential, Exists: err == nil})
	}
	add(dataDir, "the agent's data directory", false)
	add(workDir, "the agent's work directory", false)
	var stateDirs []string
	for _, p := range c.Protect {
		add(p, "an agent's config, token file or data directory", false)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
			stateDirs = append(stateDirs, filepath.Dir(p))
		}
	}
	for _, dir := range append(stateDirs, c.ControlPlaneDirs...) {
		if dir == "" || !looksLikeStateDir(dir) {
			continue
		}
		const why = "a control plane's state directory: operator tokens, the key that signs task tokens"
		if holdsAHome(dir, c.Home) {
			for _, name := range stateSecrets {
				add(filepath.Join(dir, name), why, false)
			}
			continue
		}
		add(dir, why, false)
	}
	for _, p := range c.Deny {
		add(p, "isolation-deny", false)
	}
	own := len(d.list)
	for _, home := range homes(c.Home) {
		for _, cred := range DefaultDeny {
			add(filepath.Join(home, cred.Path), cred.Holds, true)
		}
	}
	for _, a := range c.Allow {
		if err := d.lift(a, own); err != nil {
			return denial{}, err
		}
	}
	return d, nil
}

// lift applies one allowed path: it removes the credential it names, or
// grants reading it inside one. The first own entries of d.list are the
// agent's and the operator's: an allowed path that is one of them, lies
// in one or holds one is refused.
func (d *denial) lift(path string, own int) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("isolation-allow %s: %v", path, err)
	}
	real := canonical(abs)
	for _, e := range d.list[:own] {
		if overlaps(abs, e.Path) || overlaps(real, canonical(e.Path)) {
			return fmt.Errorf("isolation-allow %s: it stays denied: %s is %s; only entries of the default deny list, or paths inside one, can be allowed", path, e.Path, e.Why)
		}
	}
	for i := own; i < len(d.list); i++ {
		e := d.list[i]
		switch {
		case abs == e.Path || real == canonical(e.Path):
			d.list = slices.Delete(d.list, i, i+1)
			return nil
		case beneath(abs, e.Path) || beneath(real, canonical(e.Path)):
			d.allow = append(d.allow, abs)
			return nil
		}
	}
	return fmt.Errorf("isolation-allow %s: not on the default deny list nor inside an entry of it (agent doctor lists them); only those can be allowed", path)
}

// holdsAHome reports whether dir is a home directory whose credentials
// are denied, or holds one: it cannot be denied whole.
func holdsAHome(dir, home string) bool {
	dir = canonical(absOr(dir))
	for _, h := range homes(home) {
		if h = canonical(h); h == dir || beneath(h, dir) {
			return true
		}
	}
	return false
}

// canonical is abs with its symbolic links resolved, as far as it exists.
func canonical(abs string) string {
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	if dir := filepath.Dir(abs); dir != abs {
		return filepath.Join(canonical(dir), filepath.Base(abs))
	}
	return abs
}

func absOr(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// overlaps reports whether a and b are the same path or one holds the
// other.
func overlaps(a, b string) bool { return a == b || beneath(a, b) || beneath(b, a) }

// beneath reports whether path lies strictly beneath dir.
func beneath(path, dir string) bool {
	if dir == "/" {
		return path != "/"
	}
	return strings.HasPrefix(path, dir+"/")
}
