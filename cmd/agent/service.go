package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func newServiceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run `agent run` as a systemd service (a launchd job on macOS): install, uninstall, status, start, stop, print",
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
		newServiceStatusCmd(), newServiceStartCmd(), newServiceStopCmd())
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

// serviceName is the systemd unit's name; launchdLabel the launchd job's.
const (
	serviceName  = "agent.service"
	launchdLabel = "dev.edgeagent.agent"
)

// serviceFlags are what every service subcommand takes: which service.
type serviceFlags struct {
	manager string
	system  bool
	runAs   string
	// writes: the command makes a unit (install, print), whose account
	// must be named (see target).
	writes bool
}

func (f *serviceFlags) add(cmd *cobra.Command, withRunAs bool) {
	cmd.Flags().BoolVar(&f.system, "system", false, "a system unit (/etc/systemd/system; a LaunchDaemon on macOS) rather than the user's; needs root")
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
	system  bool
	// account runs the service: the caller for a user service, --run-as
	// (else the user sudo was run by) for a system one.
	account *user.User
	// configHome is the caller's config directory ($XDG_CONFIG_HOME or
	// ~/.config): user units and the environment file go below it.
	configHome string
}

func (f *serviceFlags) target() (serviceTarget, error) {
	t := serviceTarget{manager: serviceManager(f.manager), system: f.system}
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

// file is where the unit or plist goes.
func (t serviceTarget) file() string {
	switch {
	case t.manager == launchd && t.system:
		return filepath.Join("/Library/LaunchDaemons", launchdLabel+".plist")
	case t.manager == launchd:
		return filepath.Join(t.account.HomeDir, "Library", "LaunchAgents", launchdLabel+".plist")
	case t.system:
		return filepath.Join("/etc/systemd/system", serviceName)
	}
	return filepath.Join(t.configHome, "systemd", "user", serviceName)
}

// envFile is the systemd unit's EnvironmentFile, where secrets such as
// AGENT_TOKEN or ANTHROPIC_API_KEY go. launchd has none.
func (t serviceTarget) envFile() string {
	if t.system {
		return "/etc/agent/agent.env"
	}
	return filepath.Join(t.configHome, "agent", "agent.env")
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
// that names no data directory: /var/lib/agent, made by systemd 0700.
const stateDirectory = "agent"

// defaultDataDir is the data directory agent run would use as the
// service's account when none is set.
func (t serviceTarget) defaultDataDir() string {
	switch {
	case t.manager == systemd && t.system && t.account.Uid == "0":
		return filepath.Join("/var/lib", stateDirectory)
	case t.system:
		return filepath.Join(t.account.HomeDir, ".local", "state", "agent")
	}
	return defaultDataDir()
}

// logFile is where launchd writes the agent's output (systemd: the
// journal).
func (t serviceTarget) logFile() string {
	if t.system {
		return "/Library/Logs/agent/agent.log"
	}
	return filepath.Join(t.account.HomeDir, "Library", "Logs", "agent", "agent.log")
}

// logsHint says how to read the service's logs.
func (t serviceTarget) logsHint() string {
	switch {
	case t.manager == launchd:
		return "tail -f " + t.logFile()
	case t.system:
		return "journalctl -u agent -f"
	}
	return "journalctl --user -u agent -f"
}

// uid and gid of the service's account.
func (t serviceTarget) ids() (uid, gid int) {
	uid, _ = strconv.Atoi(t.account.Uid)
	gid, _ = strconv.Atoi(t.account.Gid)
	return uid, gid
}
