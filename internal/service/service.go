// Package service makes and manages the agent's service: a systemd unit
// (a launchd job on macOS) that runs `agent run`. It renders units and
// plists from a Spec, installs them (undoing what it wrote when an install
// cannot finish), uninstalls them, reads back what is installed, asks the
// service manager for the service's state and drives it (start, stop,
// restart, logs), and replaces the binary a service runs (upgrade).
//
// It knows nothing of agent run's settings: the command resolves its flags,
// environment file and config file into plain values (a Target, a Spec)
// and hands them here.
package service

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// Manager is the service manager a unit is made for.
type Manager string

// The service managers a unit can be made for.
const (
	Systemd Manager = "systemd"
	Launchd Manager = "launchd"
)

// HostManager is this system's service manager.
func HostManager() Manager {
	if runtime.GOOS == "darwin" {
		return Launchd
	}
	return Systemd
}

// UnitName is the systemd unit's name and LaunchdLabel the launchd job's,
// for the service --name does not name; a named one is agent-NAME.service
// and dev.edgeagent.agent.NAME.
const (
	UnitName     = "agent.service"
	LaunchdLabel = "dev.edgeagent.agent"
)

// Where system units and daemons are; variables so that a test can put
// them in a temporary directory.
var (
	SystemUnitDir    = "/etc/systemd/system"
	LaunchDaemonsDir = "/Library/LaunchDaemons"
)

// nameRe is what a service's name may be: it goes into a unit's name, a
// launchd label and file names.
var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// ValidName reports whether name can name a service ("" is the unnamed
// one): up to 32 lower-case letters, digits, - and _, starting with a
// letter or digit.
func ValidName(name string) bool { return name == "" || nameRe.MatchString(name) }

// UsageError marks a mistake in what the person asked for (the command
// exits 2), as opposed to a failure of the machine.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// oneLine keeps a message from a tool to one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// Target is one installed (or to be installed) service: the manager, user
// or system, and the account it runs as, whose home holds the executors'
// own state (~/.codex, ~/.claude).
type Target struct {
	Manager Manager
	// Name is --name: "" for the agent, else agent-NAME.
	Name   string
	System bool
	// Account runs the service: the caller for a user service, the one
	// named to run a system one.
	Account *user.User
	// ConfigHome is the caller's config directory ($XDG_CONFIG_HOME or
	// ~/.config): user units and the environment file go below it.
	ConfigHome string
	// StateHome is the directory that holds the caller's default data
	// directory ($XDG_STATE_HOME or ~/.local/state): a user service's data
	// directory goes below it.
	StateHome string
}

// LookupUser is user.Lookup, and where that finds no one, getent, which
// asks the system's name services (LDAP, sssd) as libc does: the agent is
// built without cgo (make build), and Go's own lookup reads only
// /etc/passwd.
func LookupUser(name string) (*user.User, error) {
	u, err := user.Lookup(name)
	if err == nil {
		return u, nil
	}
	out, gerr := exec.Command("getent", "passwd", name).Output()
	if gerr != nil {
		return nil, err
	}
	// name:password:uid:gid:gecos:home:shell
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), ":")
	if len(f) != 7 || f[0] != name {
		return nil, err
	}
	for _, id := range f[2:4] {
		if _, perr := strconv.ParseUint(id, 10, 32); perr != nil {
			return nil, err
		}
	}
	gecos, _, _ := strings.Cut(f[4], ",")
	return &user.User{Username: f[0], Uid: f[2], Gid: f[3], Name: gecos, HomeDir: f[5]}, nil
}

// Base is the stem of the service's names: agent, or agent-NAME.
func (t Target) Base() string {
	if t.Name == "" {
		return "agent"
	}
	return "agent-" + t.Name
}

// Unit is the systemd unit's name.
func (t Target) Unit() string { return t.Base() + ".service" }

// Label is the launchd job's label.
func (t Target) Label() string {
	if t.Name == "" {
		return LaunchdLabel
	}
	return LaunchdLabel + "." + t.Name
}

// File is where the unit or plist goes.
func (t Target) File() string {
	switch {
	case t.Manager == Launchd && t.System:
		return filepath.Join(LaunchDaemonsDir, t.Label()+".plist")
	case t.Manager == Launchd:
		return filepath.Join(t.Account.HomeDir, "Library", "LaunchAgents", t.Label()+".plist")
	case t.System:
		return filepath.Join(SystemUnitDir, t.Unit())
	}
	return filepath.Join(t.ConfigHome, "systemd", "user", t.Unit())
}

// Installed fails, in one line, when the service's unit (or plist) is
// not there.
func (t Target) Installed() error {
	if _, err := os.Stat(t.File()); errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("not installed: there is no %s (agent service install)", t.File())
	}
	return nil
}

// EnvFile is the systemd unit's EnvironmentFile, where secrets such as
// AGENT_TOKEN or ANTHROPIC_API_KEY go. launchd has none.
func (t Target) EnvFile() string {
	if t.System {
		return filepath.Join("/etc/agent", t.Base()+".env")
	}
	return filepath.Join(t.ConfigHome, "agent", t.Base()+".env")
}

// ConfigFile is the config file agent run reads by default as the
// service's account.
func (t Target) ConfigFile() string {
	switch {
	case t.Account.Uid == "0":
		return "/etc/agent/agent.toml"
	case t.System:
		return filepath.Join(t.Account.HomeDir, ".config", "agent", "agent.toml")
	}
	return filepath.Join(t.ConfigHome, "agent", "agent.toml")
}

// stateDirectory is systemd's StateDirectory= for a root system service
// that names no data directory: /var/lib/agent (agent-NAME), made by
// systemd 0700.
func (t Target) stateDirectory() string { return t.Base() }

// DefaultDataDir is the service's data directory when agent run's flags
// name none: the one agent run would use as the service's account, or
// beside it, agent-NAME, for a named service.
func (t Target) DefaultDataDir() string {
	switch {
	case t.Manager == Systemd && t.System && t.Account.Uid == "0":
		return filepath.Join("/var/lib", t.stateDirectory())
	case t.System:
		return filepath.Join(t.Account.HomeDir, ".local", "state", t.Base())
	}
	return filepath.Join(t.StateHome, t.Base())
}

// LogFile is where launchd writes the agent's output (systemd: the
// journal).
func (t Target) LogFile() string {
	if t.System {
		return filepath.Join("/Library/Logs/agent", t.Base()+".log")
	}
	return filepath.Join(t.Account.HomeDir, "Library", "Logs", "agent", t.Base()+".log")
}

// LogsHint says how to read the service's logs.
func (t Target) LogsHint() string {
	return "agent service logs" + t.FlagsHint() + " (" + t.logsCall(true).String() + ")"
}

// FlagsHint repeats the flags that name this target, for a command to
// copy.
func (t Target) FlagsHint() string {
	s := ""
	if t.Name != "" {
		s += " --name " + t.Name
	}
	if t.Manager != HostManager() {
		s += " --manager " + string(t.Manager)
	}
	if t.System {
		s += " --system"
	}
	return s
}

// ids are the uid and gid of the service's account.
func (t Target) ids() (uid, gid int) {
	uid, _ = strconv.Atoi(t.Account.Uid)
	gid, _ = strconv.Atoi(t.Account.Gid)
	return uid, gid
}
