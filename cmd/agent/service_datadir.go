package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// This machine's agent: the commands that read an agent's data directory
// (tasks, health, stop, outbox) read the installed service's when neither
// --data-dir, AGENT_DATA_DIR nor the config file names one, so that a
// root system service's /var/lib/agent, or a service installed with
// --data-dir, is found without being named.

// followsServiceAnnotation marks a command whose default data directory
// is the installed service's (see dataDirFlag).
const followsServiceAnnotation = "data-dir-follows-service"

// fromService: the data directory an installed service names.
const fromService originKind = "service"

// serviceOnMachine is an installed service whose data directory the
// caller may read.
type serviceOnMachine struct {
	file    string // its unit or plist
	name    string // its --name, "" for the agent
	dataDir string
}

// servicesOnMachine lists the services install wrote that run for the
// caller: its user units (launch agents), and the system's units that run
// as it, or, for root, all of them. The unnamed agent comes first, a user
// unit before a system one.
func servicesOnMachine() []serviceOnMachine {
	me, err := user.Current()
	if err != nil {
		return nil
	}
	var f serviceFlags
	f.manager = string(hostManager())
	t, err := f.target()
	if err != nil {
		return nil
	}
	var out []serviceOnMachine
	for _, system := range []bool{false, true} {
		if system && t.manager == launchd && me.Uid != "0" {
			continue // a LaunchDaemon runs as root unless its UserName says
		}
		t.system = system
		// The unnamed one and the named ones: agent.service and
		// agent-*.service; dev.edgeagent.agent.plist and
		// dev.edgeagent.agent.*.plist.
		t.name = ""
		names := map[string]string{t.file(): ""}
		files := []string{t.file()}
		t.name = "*"
		named, _ := filepath.Glob(t.file())
		slices.Sort(named)
		for _, file := range named {
			names[file] = serviceFileName(t, file)
		}
		for _, file := range append(files, named...) {
			inst, err := readServiceFile(t.manager, file)
			if err != nil || inst.dataDir == "" {
				continue
			}
			if system && t.manager == systemd && me.Uid != "0" && inst.user != me.Username {
				continue
			}
			out = append(out, serviceOnMachine{file: file, name: names[file], dataDir: inst.dataDir})
		}
	}
	slices.SortStableFunc(out, func(a, b serviceOnMachine) int {
		return strings.Compare(a.name, b.name) // stable: a user's before the system's
	})
	return out
}

// serviceFileName is the --name in a service file's name that file()
// made with the name "*".
func serviceFileName(t serviceTarget, file string) string {
	prefix, suffix, _ := strings.Cut(filepath.Base(t.file()), "*")
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), prefix), suffix)
}

// serviceDataDir gives a command that follows the service (see
// dataDirFlag) the installed service's data directory, when its settings
// left the data directory at the default. Where that is ambiguous
// (several services, or the default directory holds an agent's data too),
// it says on w which it read and the others.
func serviceDataDir(cmd *cobra.Command, r *resolved, w io.Writer) error {
	if cmd.Annotations[followsServiceAnnotation] == "" || r.origins["data-dir"].kind != fromDefault {
		return nil
	}
	services := servicesOnMachine()
	if len(services) == 0 {
		return nil
	}
	use := services[0]
	var others []string
	for _, s := range services[1:] {
		if s.dataDir != use.dataDir {
			others = append(others, fmt.Sprintf("%s (%s)", s.dataDir, filepath.Base(s.file)))
		}
	}
	if def := defaultDataDir(); !slices.ContainsFunc(services, func(s serviceOnMachine) bool { return s.dataDir == def }) {
		if _, err := os.Stat(def); err == nil {
			others = append(others, def+" (the default, which agent run uses outside the service)")
		}
	}
	if err := cmd.Flags().Set("data-dir", use.dataDir); err != nil {
		return err
	}
	r.origins["data-dir"] = origin{fromService, use.file}
	if len(others) > 0 {
		fmt.Fprintf(w, "agent: reading %s, the data directory of %s; also here: %s; --data-dir says which\n",
			use.dataDir, use.file, strings.Join(others, ", "))
	}
	return nil
}
