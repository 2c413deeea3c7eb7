package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/service"
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

// servicesOnMachine lists the services installed on this machine that
// run for the caller (see service.ServicesOnMachine).
func servicesOnMachine() []service.OnMachine {
	f := serviceFlags{manager: string(service.HostManager())}
	caller, err := f.target()
	if err != nil {
		return nil
	}
	return service.ServicesOnMachine(caller)
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
		if s.DataDir != use.DataDir {
			others = append(others, fmt.Sprintf("%s (%s)", s.DataDir, filepath.Base(s.File)))
		}
	}
	if def := defaultDataDir(); !slices.ContainsFunc(services, func(s service.OnMachine) bool { return s.DataDir == def }) {
		if _, err := os.Stat(def); err == nil {
			others = append(others, def+" (the default, which agent run uses outside the service)")
		}
	}
	if err := cmd.Flags().Set("data-dir", use.DataDir); err != nil {
		return err
	}
	r.origins["data-dir"] = origin{fromService, use.File}
	if len(others) > 0 {
		fmt.Fprintf(w, "agent: reading %s, the data directory of %s; also here: %s; --data-dir says which\n",
			use.DataDir, use.File, strings.Join(others, ", "))
	}
	return nil
}
