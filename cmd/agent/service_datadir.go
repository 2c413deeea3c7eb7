package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/internal/settings"
)

// This machine's agent: the commands that read an agent's data directory
// (tasks, health, stop, outbox) read the installed service's when neither
// --data-dir, AGENT_DATA_DIR nor the config file names one, so that a
// root system service's /var/lib/agent, or a service installed with
// --data-dir, is found without being named.

// followsServiceAnnotation marks a command whose default data directory
// is the installed service's (see dataDirFlag).
const followsServiceAnnotation = "data-dir-follows-service"

// callerService is the caller's own service on this host's manager, the
// one the services on this machine are found for.
func callerService() (service.Target, error) {
	f := serviceFlags{manager: string(service.HostManager())}
	return f.target()
}

// servicesOnMachine lists the services installed on this machine that
// run for the caller (see service.ServicesOnMachine).
func servicesOnMachine() []service.OnMachine {
	caller, err := callerService()
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
func serviceDataDir(cmd *cobra.Command, r *settings.Resolved, w io.Writer) error {
	if cmd.Annotations[followsServiceAnnotation] == "" {
		return nil
	}
	return service.FollowDataDir(r, callerService, agentsettings.DefaultDataDir(), func(dir string) error { return cmd.Flags().Set("data-dir", dir) }, w)
}
