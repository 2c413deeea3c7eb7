package isolation

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/runner"
)

// EgressMode says how far attempts reach on the network.
type EgressMode string

// The egress modes.
const (
	// EgressAuto confines attempts' network where the kernel lets the
	// agent make a network namespace per attempt, and says loudly (log,
	// health, doctor) where it does not.
	EgressAuto EgressMode = "auto"
	// EgressAllowlist confines it, or the agent does not start.
	EgressAllowlist EgressMode = "allowlist"
	// EgressOpen leaves attempts the machine's network, on the
	// operator's word; said as loudly as a kernel that cannot confine.
	EgressOpen EgressMode = "open"
)

// EgressModes lists the modes, for flags and errors.
var EgressModes = []EgressMode{EgressAuto, EgressAllowlist, EgressOpen}

// openRisk is what a task can do where its network is open.
const openRisk = "a task connects wherever this machine can, the control plane, PostgreSQL and other services on its loopback included, and can send out what it reads"

var (
	probeOnce sync.Once
	probeErr  error
)

// probeEgress is keeper.ProbeEgress, asked once: the answer does not
// change while the agent runs. A test stands in a kernel that refuses.
var probeEgress = func() error {
	probeOnce.Do(func() { probeErr = keeper.ProbeEgress() })
	return probeErr
}

// ResolveEgress resolves how attempts' network is confined, as Resolve
// does: the runner's egress (nil when open) and a line saying which.
func ResolveEgress(c Config) (*runner.Egress, string, error) {
	rules, err := egress.ParseRules(c.EgressAllow)
	if err != nil {
		return nil, "", fmt.Errorf("egress allow: %v", err)
	}
	switch c.Egress {
	case "", EgressAuto, EgressAllowlist:
	case EgressOpen:
		return nil, "network open (egress open): " + openRisk, nil
	default:
		return nil, "", fmt.Errorf("egress %q: want auto, allowlist or open", c.Egress)
	}
	why := ""
	switch {
	case runtime.GOOS != "linux":
		why = "network namespaces are Linux's"
	case !keeper.Supported():
		why = "this program does not run attempts under a keeper"
	default:
		if err := probeEgress(); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		if c.Egress == EgressAllowlist {
			return nil, "", fmt.Errorf("egress allowlist: %s", why)
		}
		return nil, "network open: " + why + "; " + openRisk, nil
	}
	line := "network: tasks reach their executor's model API"
	if len(rules) > 0 {
		names := make([]string, len(rules))
		for i, r := range rules {
			names[i] = r.String()
		}
		line += " and " + strings.Join(names, ", ")
	}
	return &runner.Egress{Allow: rules}, line + ", through the agent's proxy; nothing else, this machine's loopback included", nil
}

// ResolveUser resolves who tasks run as, as Resolve does. Only a root agent changes it:
// its tasks run as the task user, or as root without a capability when
// none is named, provided they run confined (a confined attempt of a root
// agent starts through a stage that drops them); unconfined, they are
// root. confined says whether they are (files or network).
func ResolveUser(c Config, confined bool) (*runner.TaskUser, string, bool, error) {
	root := os.Geteuid() == 0
	if c.TaskUser != "" && !root {
		return nil, "", false, fmt.Errorf("task user %q: only an agent running as root runs its tasks as another user (this one runs as uid %d)", c.TaskUser, os.Geteuid())
	}
	if !root {
		return nil, "", false, nil
	}
	if c.TaskUser != "" {
		u, err := runner.LookupTaskUser(c.TaskUser)
		if err != nil {
			return nil, "", false, err
		}
		return u, "tasks run as " + u.Name + " (uid " + strconv.Itoa(int(u.Uid)) + "), without capabilities", false, nil
	}
	if !confined {
		return nil, "tasks run as root with every capability: they read and change anything on this machine, the agent's environment and memory included; confine them, and name an unprivileged --task-user", true, nil
	}
	return nil, "tasks run as root without capabilities: they read root's files but the agent's; --task-user NAME runs them as a user who cannot", false, nil
}
