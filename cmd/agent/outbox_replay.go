package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
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
			if url == "" {
				return usagef("--control-plane is required")
			}
			token, err := readToken(tokenFile)
			if err != nil {
				return err
			}
			if err := outboxview.Require(dataDir); err != nil {
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
			if errors.Is(err, outbox.ErrLocked) || errors.Is(err, outbox.ErrNoOutbox) {
				return outboxview.Explain(dataDir, err) // nothing was tried
			}
			// What was delivered is said even when the replay stopped early.
			if asJSON {
				if jerr := writeJSON(cmd.OutOrStdout(), res); jerr != nil {
					return jerr
				}
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), res.Line())
			}
			if err != nil {
				return fmt.Errorf("replay stopped with %d records still pending: %w", res.Pending, err)
			}
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	fl := cmd.Flags()
	controlPlaneFlags(cmd, &url, &tokenFile, &insecure)
	fl.BoolVar(&asJSON, "json", false, `print {"sent", "accepted", "duplicate", "dead", "pending"} as JSON`)
	return cmd
}
