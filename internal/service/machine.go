package service

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgeagent/agent/internal/settings"
)

// OnMachine is an installed service whose data directory the caller may
// read.
type OnMachine struct {
	File    string // its unit or plist
	Name    string // its --name, "" for the agent
	DataDir string
}

// ServicesOnMachine lists the services Install wrote that run for the
// caller, whose user service caller is (its Account the caller): its user
// units (launch agents), and the system's units that run as it, or, for
// root, all of them. The unnamed agent comes first, a user unit before a
// system one. Those that name no data directory are left out.
func ServicesOnMachine(caller Target) []OnMachine {
	me, t := caller.Account, caller
	var out []OnMachine
	for _, system := range []bool{false, true} {
		if system && t.Manager == Launchd && me.Uid != "0" {
			continue // a LaunchDaemon runs as root unless its UserName says
		}
		t.System = system
		// The unnamed one and the named ones: agent.service and
		// agent-*.service; dev.edgeagent.agent.plist and
		// dev.edgeagent.agent.*.plist.
		t.Name = ""
		names := map[string]string{t.File(): ""}
		files := []string{t.File()}
		t.Name = "*"
		named, _ := filepath.Glob(t.File())
		slices.Sort(named)
		for _, file := range named {
			names[file] = serviceFileName(t, file)
		}
		for _, file := range append(files, named...) {
			inst, err := ReadServiceFile(t.Manager, file)
			if err != nil || inst.DataDir == "" {
				continue
			}
			if system && t.Manager == Systemd && me.Uid != "0" && inst.User != me.Username {
				continue
			}
			out = append(out, OnMachine{File: file, Name: names[file], DataDir: inst.DataDir})
		}
	}
	slices.SortStableFunc(out, func(a, b OnMachine) int {
		return strings.Compare(a.Name, b.Name) // stable: a user's before the system's
	})
	return out
}

// serviceFileName is the --name in a service file's name that File()
// made with the name "*".
func serviceFileName(t Target, file string) string {
	prefix, suffix, _ := strings.Cut(filepath.Base(t.File()), "*")
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), prefix), suffix)
}

// Followed is the installed service whose data directory the commands
// that read one follow when nothing names it (see FollowedDataDir), and
// the other data directories they could have meant.
type Followed struct {
	OnMachine
	Others []string // "DIR (FILE)" each, or the default's
}

// FromService is the origin of a data directory an installed service names
// (a settings.OriginKind).
const FromService = "service"

// FollowedDataDir is the service, of those on this machine for caller,
// whose data directory a command follows; defaultDir is the directory
// agent run uses outside a service, one of the others when it holds an
// agent's data too. ok is false when no service is installed.
func FollowedDataDir(caller Target, defaultDir string) (f Followed, ok bool) {
	services := ServicesOnMachine(caller)
	if len(services) == 0 {
		return f, false
	}
	f.OnMachine = services[0]
	for _, s := range services[1:] {
		if s.DataDir != f.DataDir {
			f.Others = append(f.Others, fmt.Sprintf("%s (%s)", s.DataDir, filepath.Base(s.File)))
		}
	}
	if !slices.ContainsFunc(services, func(s OnMachine) bool { return s.DataDir == defaultDir }) {
		if _, err := os.Stat(defaultDir); err == nil {
			f.Others = append(f.Others, defaultDir+" (the default, which agent run uses outside the service)")
		}
	}
	return f, true
}

// FollowDataDir gives a command whose settings r left its data directory
// at the default the data directory of the service it follows
// (FollowedDataDir for caller, found only then): set sets it, and r's
// origin then names the service's file. Where that is ambiguous, it says
// on w which it read and the others (Note). A caller that cannot be named
// follows no service.
func FollowDataDir(r *settings.Resolved, caller func() (Target, error), defaultDir string, set func(string) error, w io.Writer) error {
	if r.Origins["data-dir"].Kind != settings.FromDefault {
		return nil
	}
	t, err := caller()
	if err != nil {
		return nil
	}
	followed, ok := FollowedDataDir(t, defaultDir)
	if !ok {
		return nil
	}
	if err := set(followed.DataDir); err != nil {
		return err
	}
	r.Origins["data-dir"] = settings.Origin{Kind: FromService, Where: followed.File}
	if note := followed.Note(); note != "" {
		fmt.Fprintln(w, note)
	}
	return nil
}

// Note says which data directory was read and which others are here, ""
// when there is no other.
func (f Followed) Note() string {
	if len(f.Others) == 0 {
		return ""
	}
	return fmt.Sprintf("agent: reading %s, the data directory of %s; also here: %s; --data-dir says which",
		f.DataDir, f.File, strings.Join(f.Others, ", "))
}

// Secrets are the paths of the services on this machine that no task may
// reach, whichever agent runs it: each one's data directory and the token
// file its unit names.
func Secrets(m Manager, services []OnMachine) []string {
	var paths []string
	for _, svc := range services {
		paths = append(paths, svc.DataDir)
		inst, err := ReadServiceFile(m, svc.File)
		if err != nil {
			continue
		}
		for i, arg := range inst.Args {
			if v, ok := strings.CutPrefix(arg, "--token-file="); ok {
				paths = append(paths, v)
			} else if arg == "--token-file" && i+1 < len(inst.Args) {
				paths = append(paths, inst.Args[i+1])
			}
		}
	}
	return paths
}
