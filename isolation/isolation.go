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
	"path/filepath"
	"runtime"
	"strconv"

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
	// config file and the token file. The data directory always is.
	Protect []string
	// Deny are more paths no task may read or write (~/.ssh, say).
	Deny []string
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
}

// Confinement is how attempts are confined, as resolved on this kernel:
// the runner's isolation (nil when unconfined) and a line saying which,
// for logs, health and doctor; the same for their network (Egress nil:
// not confined) and the user they run as.
type Confinement struct {
	Runner *runner.Isolation
	Line   string

	Egress     *runner.Egress
	EgressLine string

	TaskUser *runner.TaskUser
	// UserLine says who tasks run as; UserWarn, that they run as root
	// with root's capabilities (an unconfined root agent).
	UserLine string
	UserWarn bool
}

// unconfinedRisk is what a task can do where attempts are not confined.
const unconfinedRisk = "a task can read the agent's token and change its files and config"

// Resolve resolves the isolation c asks for on this kernel, for an agent
// whose data directory is dataDir and work root workDir ("" for the one
// inside the data directory): both are out of every task's reach. It
// fails on a mode it does not know, on landlock where the kernel cannot
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
	deny := []string{dataDir}
	if workDir != "" {
		deny = append(deny, workDir)
	}
	deny = append(append(deny, c.Protect...), c.Deny...)
	for i, p := range deny {
		if abs, err := filepath.Abs(p); err == nil {
			deny[i] = abs
		}
	}
	return Confinement{Runner: &runner.Isolation{Deny: deny, Write: c.Write},
		Line: "landlock (ABI " + strconv.Itoa(abi) + "): tasks read all but the agent's files and write only their work directory, temporary directories, /dev and their CLI's state"}, nil
}
