package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/tasksource"
)

// cpFlags are the settings a command reaches the control plane with: its
// URL, the token file (else AGENT_TOKEN) and --insecure. submit, tasks
// reply, cancel, retry and every --remote form share them.
type cpFlags struct {
	url, tokenFile string
	// operatorTokenFile is the person's token file, over tokenFile
	// (which agent run reads for the registration secret) unless
	// --token-file is on the command line.
	operatorTokenFile string
	insecure          bool
	flags             *pflag.FlagSet
}

// add makes cmd take the control plane settings.
func (f *cpFlags) add(cmd *cobra.Command) {
	controlPlaneFlags(cmd, &f.url, &f.tokenFile, &f.insecure)
	agentSettings.Bind(cmd.Flags(), "operator-token-file", &f.operatorTokenFile)
	f.flags = cmd.Flags()
}

// file is the token file a person's command reads: --token-file given on
// the command line, else operator-token-file, else token-file.
func (f *cpFlags) file() string {
	if f.operatorTokenFile == "" || f.flags != nil && f.flags.Changed("token-file") {
		return f.tokenFile
	}
	return f.operatorTokenFile
}

// client is a client of the control plane the flags name. The token is
// read here and never shows in an error.
func (f *cpFlags) client() (*controlplane.Client, error) {
	if f.url == "" {
		return nil, usagef("--control-plane is required (or control-plane in the config file, or AGENT_CONTROL_PLANE)")
	}
	token, err := readToken(f.file())
	if err != nil {
		return nil, err
	}
	return controlplane.NewClient(f.url, token, controlplane.ClientOptions{Insecure: f.insecure, UserAgent: "agent/" + agentVersion()})
}

// sourceFlags choose where a tasks command reads tasks: the data directory
// (the default; read without taking the agent's lock, so it works while
// the agent runs) or, with --remote, the control plane.
type sourceFlags struct {
	dataDir string
	remote  bool
	cp      cpFlags
}

// add makes cmd take --data-dir, --remote and the control plane settings.
func (f *sourceFlags) add(cmd *cobra.Command) {
	dataDirFlag(cmd, &f.dataDir)
	cmd.Flags().BoolVar(&f.remote, "remote", false, "read the control plane (--control-plane, --token-file) instead of the data directory")
	f.cp.add(cmd)
}

// source is where to read tasks.
func (f *sourceFlags) source() (tasksource.Source, error) {
	if !f.remote {
		return tasksource.Local{DataDir: f.dataDir}, nil
	}
	c, err := f.cp.client()
	if err != nil {
		return nil, err
	}
	return tasksource.Remote{Client: c}, nil
}

// taskIDArg accepts exactly one argument, the task's id.
func taskIDArg(usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("give one task id: agent tasks %s", usage)
		}
		return nil
	}
}
