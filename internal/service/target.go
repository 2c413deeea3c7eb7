package service

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"

	"github.com/edgeagent/agent/internal/taskview"
)

// Request is what a service command asks for: which service and, for one
// that writes a unit, who runs it.
type Request struct {
	Manager Manager // --manager
	Name    string  // --name
	System  bool    // --system
	RunAs   string  // --run-as
	// SudoUser is $SUDO_USER, the user who ran sudo: a system service
	// runs as them unless RunAs says.
	SudoUser string
	// Writes: the command makes a unit (install, print), whose account
	// must be named.
	Writes bool
	// StateHome is Target.StateHome: where the caller's default data
	// directory is.
	StateHome string
}

// NewTarget makes the target r names, refusing what does not name one. A
// system service that would write a unit is never made to run as root by
// default: its tasks, which run whatever a model asks, could write root's
// home (an authorized_keys among it). Root takes an explicit RunAs root.
func NewTarget(r Request) (Target, error) {
	t := Target{Manager: r.Manager, System: r.System, Name: r.Name, StateHome: r.StateHome}
	if !ValidName(r.Name) {
		return t, usagef("--name %q: want up to 32 lower-case letters, digits, - and _, starting with a letter or digit", taskview.Visible(r.Name))
	}
	switch t.Manager {
	case Systemd, Launchd:
	default:
		return t, usagef("--manager %q: want systemd or launchd", r.Manager)
	}
	if r.RunAs != "" && !r.System {
		return t, usagef("--run-as is for a system service (--system); a user service runs as you")
	}
	runAs := r.RunAs
	if runAs == "" && r.System {
		runAs = r.SudoUser
	}
	if r.Writes && r.System && r.RunAs == "" && (runAs == "" || runAs == "root") {
		return t, usagef("--system needs --run-as USER (sudo names you in SUDO_USER): the service would run as root and its tasks could write root's home; --run-as root says you mean it")
	}
	var err error
	switch {
	case r.System && runAs != "":
		t.Account, err = LookupUser(runAs)
	case r.System:
		t.Account, err = user.LookupId("0")
	default:
		t.Account, err = user.Current()
	}
	if err != nil {
		return t, fmt.Errorf("the service's user: %w", err)
	}
	if r.Writes && r.System && r.RunAs == "" && t.Account.Uid == "0" {
		return t, usagef("--system needs --run-as USER: SUDO_USER %s is root (uid 0); --run-as root says you mean it", runAs)
	}
	// systemd's user units are below $XDG_CONFIG_HOME, and the agent's
	// environment file beside them.
	if t.ConfigHome = os.Getenv("XDG_CONFIG_HOME"); t.ConfigHome == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return t, err
		}
		t.ConfigHome = filepath.Join(home, ".config")
	}
	return t, nil
}
