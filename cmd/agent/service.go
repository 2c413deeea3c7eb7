package main

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

	"github.com/spf13/cobra"
)

func newServiceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run `agent run` as a systemd service (a launchd job on macOS): install, uninstall, status, start, stop, restart, upgrade, logs, print",
		Long: `service install writes a systemd unit (a launchd plist on macOS) that runs
agent run with the flags given after --, made absolute, and starts it;
service uninstall stops and removes it, keeping the data directory. The
unit names the token file or reads AGENT_TOKEN from its environment file;
it never holds the token.

User units by default (systemctl --user; the service runs while you are
logged in, or always after loginctl enable-linger); --system for a system
unit (/etc/systemd/system, needs root), which runs as --run-as USER, or as
the user sudo was run by: never as root unless --run-as root says so.`,
	}
	cmd.AddCommand(newServicePrintCmd(), newServiceInstallCmd(), newServiceUninstallCmd(),
		newServiceStatusCmd(), newServiceStartCmd(), newServiceStopCmd(), newServiceRestartCmd(), newServiceUpgradeCmd(), newServiceLogsCmd())
	return cmd
}

// serviceManager is the service manager a unit is made for.
type serviceManager string

const (
	systemd serviceManager = "systemd"
	launchd serviceManager = "launchd"
)

// hostManager is this system's service manager.
func hostManager() serviceManager {
	if runtime.GOOS == "darwin" {
		return launchd
	}
	return systemd
}

// serviceName is the systemd unit's name and launchdLabel the launchd
// job's, for the service --name does not name; a named one is
// agent-NAME.service and dev.edgeagent.agent.NAME.
const (
	serviceName  = "agent.service"
	launchdLabel = "dev.edgeagent.agent"
)

// Where system units and daemons are; variables so that a test can put
// them in a temporary directory.
var (
	systemUnitDir    = "/etc/systemd/system"
	launchDaemonsDir = "/Library/LaunchDaemons"
)

// serviceNameRe is what --name takes: it goes into a unit's name, a
// launchd label and file names.
var serviceNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// checkServiceName refuses a --name that would not make a unit name.
func checkServiceName(name string) error {
	if name != "" && !serviceNameRe.MatchString(name) {
		return usagef("--name %q: want up to 32 lower-case letters, digits, - and _, starting with a letter or digit", visible(name))
	}
	return nil
}

// serviceFlags are what every service subcommand takes: which service.
type serviceFlags struct {
	manager string
	name    string
	system  bool
	runAs   string
	// writes: the command makes a unit (install, print), whose account
	// must be named (see target).
	writes bool
}

func (f *serviceFlags) add(cmd *cobra.Command, withRunAs bool) {
	cmd.Flags().BoolVar(&f.system, "system", false, "a system unit (/etc/systemd/system; a LaunchDaemon on macOS) rather than the user's; needs root")
	cmd.Flags().StringVar(&f.name, "name", "", "which of several agents on this machine: the unit agent-NAME.service (launchd: dev.edgeagent.agent.NAME), with its own data directory and environment file (default: the one named agent)")
	cmd.Flags().StringVar(&f.manager, "manager", string(hostManager()), "systemd or launchd (launchd's commands run only on macOS; its plist can be printed anywhere)")
	if withRunAs {
		f.writes = true
		cmd.Flags().StringVar(&f.runAs, "run-as", "", "with --system: the user the service runs as (default: the one sudo was run by; root only as --run-as root)")
	}
}

// serviceTarget is one installed (or to be installed) service: the manager,
// user or system, and the account it runs as, whose home holds the
// executors' own state (~/.codex, ~/.claude).
type serviceTarget struct {
	manager serviceManager
	// name is --name: "" for the agent, else agent-NAME.
	name   string
	system bool
	// account runs the service: the caller for a user service, --run-as
	// (else the user sudo was run by) for a system one.
	account *user.User
	// configHome is the caller's config directory ($XDG_CONFIG_HOME or
	// ~/.config): user units and the environment file go below it.
	configHome string
}

func (f *serviceFlags) target() (serviceTarget, error) {
	t := serviceTarget{manager: serviceManager(f.manager), system: f.system, name: f.name}
	if err := checkServiceName(f.name); err != nil {
		return t, err
	}
	switch t.manager {
	case systemd, launchd:
	default:
		return t, usagef("--manager %q: want systemd or launchd", f.manager)
	}
	if f.runAs != "" && !f.system {
		return t, usagef("--run-as is for a system service (--system); a user service runs as you")
	}
	runAs := f.runAs
	if runAs == "" && f.system {
		runAs = os.Getenv("SUDO_USER")
	}
	// A system unit is never made to run as root by default: its tasks,
	// which run whatever a model asks, could write root's home (an
	// authorized_keys among it). Root takes an explicit --run-as root.
	if f.writes && f.system && f.runAs == "" && (runAs == "" || runAs == "root") {
		return t, usagef("--system needs --run-as USER (sudo names you in SUDO_USER): the service would run as root and its tasks could write root's home; --run-as root says you mean it")
	}
	var err error
	switch {
	case f.system && runAs != "":
		t.account, err = lookupUser(runAs)
	case f.system:
		t.account, err = user.LookupId("0")
	default:
		t.account, err = user.Current()
	}
	if err != nil {
		return t, fmt.Errorf("the service's user: %w", err)
	}
	if f.writes && f.system && f.runAs == "" && t.account.Uid == "0" {
		return t, usagef("--system needs --run-as USER: SUDO_USER %s is root (uid 0); --run-as root says you mean it", runAs)
	}
	if t.configHome = os.Getenv("XDG_CONFIG_HOME"); t.configHome == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return t, err
		}
		t.configHome = filepath.Join(home, ".config")
	}
	return t, nil
}

// lookupUser is user.Lookup, and where that finds no one, getent, which
// asks the system's name services (LDAP, sssd) as libc does: the agent is
// built without cgo (make build), and Go's own lookup reads only
// /etc/passwd.
func lookupUser(name string) (*user.User, error) {
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

// base is the stem of the service's names: agent, or agent-NAME.
func (t serviceTarget) base() string {
	if t.name == "" {
		return "agent"
	}
	return "agent-" + t.name
}

// unit is the systemd unit's name.
func (t serviceTarget) unit() string { return t.base() + ".service" }

// label is the launchd job's label.
func (t serviceTarget) label() string {
	if t.name == "" {
		return launchdLabel
	}
	return launchdLabel + "." + t.name
}

// file is where the unit or plist goes.
func (t serviceTarget) file() string {
	switch {
	case t.manager == launchd && t.system:
		return filepath.Join(launchDaemonsDir, t.label()+".plist")
	case t.manager == launchd:
		return filepath.Join(t.account.HomeDir, "Library", "LaunchAgents", t.label()+".plist")
	case t.system:
		return filepath.Join(systemUnitDir, t.unit())
	}
	return filepath.Join(t.configHome, "systemd", "user", t.unit())
}

// installed fails, in one line, when the service's unit (or plist) is
// not there.
func (t serviceTarget) installed() error {
	if _, err := os.Stat(t.file()); errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("not installed: there is no %s (agent service install)", t.file())
	}
	return nil
}

// envFile is the systemd unit's EnvironmentFile, where secrets such as
// AGENT_TOKEN or ANTHROPIC_API_KEY go. launchd has none.
func (t serviceTarget) envFile() string {
	if t.system {
		return filepath.Join("/etc/agent", t.base()+".env")
	}
	return filepath.Join(t.configHome, "agent", t.base()+".env")
}

// configFile is the config file agent run reads by default as the
// service's account (see defaultConfigFile).
func (t serviceTarget) configFile() string {
	switch {
	case t.account.Uid == "0":
		return "/etc/agent/agent.toml"
	case t.system:
		return filepath.Join(t.account.HomeDir, ".config", "agent", "agent.toml")
	}
	return defaultConfigFile()
}

// stateDirectory is systemd's StateDirectory= for a root system service
// that names no data directory: /var/lib/agent (agent-NAME), made by
// systemd 0700.
func (t serviceTarget) stateDirectory() string { return t.base() }

// defaultDataDir is the service's data directory when agent run's flags
// name none: the one agent run would use as the service's account, or
// beside it, agent-NAME, for a named service.
func (t serviceTarget) defaultDataDir() string {
	switch {
	case t.manager == systemd && t.system && t.account.Uid == "0":
		return filepath.Join("/var/lib", t.stateDirectory())
	case t.system:
		return filepath.Join(t.account.HomeDir, ".local", "state", t.base())
	}
	return filepath.Join(filepath.Dir(defaultDataDir()), t.base())
}

// logFile is where launchd writes the agent's output (systemd: the
// journal).
func (t serviceTarget) logFile() string {
	if t.system {
		return filepath.Join("/Library/Logs/agent", t.base()+".log")
	}
	return filepath.Join(t.account.HomeDir, "Library", "Logs", "agent", t.base()+".log")
}

// logsHint says how to read the service's logs.
func (t serviceTarget) logsHint() string {
	return "agent service logs" + t.flagsHint() + " (" + strings.Join(t.logsCall(true), " ") + ")"
}

// uid and gid of the service's account.
func (t serviceTarget) ids() (uid, gid int) {
	uid, _ = strconv.Atoi(t.account.Uid)
	gid, _ = strconv.Atoi(t.account.Gid)
	return uid, gid
}
