package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
)

func newOutboxReplayCmd() *cobra.Command {
	var (
		dataDir, url, tokenFile string
		insecure, asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Deliver the pending records by hand, with the agent stopped",
		Long: `replay sends the outbox's pending records to the control plane as the agent
would, and records what became of each: sent, or dead when the control plane
rejects it for good. It takes the outbox's lock, so stop the agent first;
the agent replays on its own at every start and heartbeat.`,
		Example: `  agent outbox replay --control-plane http://127.0.0.1:8080 --token-file token --data-dir ./agent-data`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			if url == "" {
				return usagef("--control-plane is required")
			}
			token, err := readToken(tokenFile)
			if err != nil {
				return err
			}
			if err := requireOutbox(dataDir); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			res, err := agent.Replay(cmd.Context(), agent.ReplayOptions{ControlPlane: url, Token: token, Insecure: insecure, DataDir: dataDir,
				Progress: func(done, total int) {
					if !asJSON {
						fmt.Fprintf(stderr, "\rreplayed %d of %d pending records", done, total)
					}
				}})
			if !asJSON && res.Sent+res.Dead > 0 {
				fmt.Fprintln(stderr)
			}
			if err != nil {
				return explainOutboxErr(dataDir, err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d sent, %d dead, %d still pending\n", res.Sent, res.Dead, res.Pending)
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	fl := cmd.Flags()
	fl.StringVar(&url, "control-plane", "", "the control plane's URL")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the bearer token (else AGENT_TOKEN)")
	fl.BoolVar(&insecure, "insecure", false, "allow http:// to a control plane that is not on loopback")
	fl.BoolVar(&asJSON, "json", false, `print {"sent", "dead", "pending"} as JSON`)
	return cmd
}
