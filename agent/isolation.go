package agent

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/runner"
)

// IsolationMode says whether the agent confines its attempts.
type IsolationMode string

// The modes.
const (
	// IsolationAuto confines attempts where the kernel has Landlock, and
	// says loudly (log, health reason, heartbeat) where it has none.
	IsolationAuto IsolationMode = "auto"
	// IsolationLandlock confines attempts, or the agent does not start.
	IsolationLandlock IsolationMode = "landlock"
	// IsolationNone runs attempts unconfined, on the operator's word; it
	// is said as loudly as a kernel without Landlock.
	IsolationNone IsolationMode = "none"
)

// IsolationModes lists the modes, for flags and errors.
var IsolationModes = []IsolationMode{IsolationAuto, IsolationLandlock, IsolationNone}

// Isolation configures how attempts are confined: a task reads what the
// agent's user can read but the agent's own files, and writes only its
// work directory, its temporary directory, /tmp, /dev and its CLI's state
// (see runner.Isolation).
type Isolation struct {
	// Mode is auto, landlock or none. Default auto.
	Mode IsolationMode
	// Protect are the agent's files outside its data directory: the
	// config file and the token file. The data directory always is.
	Protect []string
	// Deny are more paths no task may read or write (~/.ssh, say).
	Deny []string
	// Write are more hierarchies tasks may write (a build cache, say).
	Write []string
}

// confinement is how attempts are confined, as the agent found it at
// start: the runner's isolation (nil when unconfined) and a line saying
// which, for logs, health and doctor.
type confinement struct {
	iso  *runner.Isolation
	line string
}

// unconfinedRisk is what a task can do where attempts are not confined.
const unconfinedRisk = "a task can read the agent's token and change its files and config"

// confine resolves the isolation the agent's configuration asks for on
// this kernel.
func (c Config) confine() (confinement, error) {
	iso := c.Isolation
	switch iso.Mode {
	case "", IsolationAuto, IsolationLandlock, IsolationNone:
	default:
		return confinement{}, fmt.Errorf("%w: isolation %q: want auto, landlock or none", ErrConfig, iso.Mode)
	}
	if iso.Mode == IsolationNone {
		return confinement{line: "none (isolation none): " + unconfinedRisk}, nil
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
		if iso.Mode == IsolationLandlock {
			return confinement{}, fmt.Errorf("%w: isolation landlock: %s", ErrConfig, why)
		}
		return confinement{line: "none: " + why + "; " + unconfinedRisk}, nil
	}
	deny := []string{c.DataDir}
	if c.WorkDir != "" {
		deny = append(deny, c.WorkDir)
	}
	deny = append(append(deny, iso.Protect...), iso.Deny...)
	for i, p := range deny {
		if abs, err := filepath.Abs(p); err == nil {
			deny[i] = abs
		}
	}
	return confinement{iso: &runner.Isolation{Deny: deny, Write: iso.Write},
		line: "landlock (ABI " + strconv.Itoa(abi) + "): tasks read all but the agent's files and write only their work directory, temporary directories, /dev and their CLI's state"}, nil
}
