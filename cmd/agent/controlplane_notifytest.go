package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/notify"
)

func newControlPlaneNotifyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "notify", Short: "The control plane's notification targets"}
	cmd.AddCommand(newControlPlaneNotifyTestCmd())
	return cmd
}

func newControlPlaneNotifyTestCmd() *cobra.Command {
	var (
		dir           string
		notifications notifySettings
	)
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Send a test notification to each target, now",
		Long: `test reads the notification targets as agent controlplane serve does (the
[[notify]] tables of --config, --notify-webhook, --notify-secret-file and
--data-dir for its default) and sends each one test notification (event
"test") straight away, not through the store: one line per target says
whether it was delivered. It exits 1 when any was not, 2 when the
configuration is wrong. A running control plane need not be stopped.`,
		Example: `  agent controlplane notify test --config /etc/agent/cp.toml
  agent controlplane notify test --data-dir ./cp --notify-webhook https://hooks.example.com/agent`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := notifications.checkPublicURL(); err != nil {
				return err
			}
			targets, err := notifications.targets(resolvedOf(cmd), dir, false)
			if err != nil {
				var ue usageError
				if !errors.As(err, &ue) {
					err = usageError{err}
				}
				return err
			}
			if len(targets) == 0 {
				return usagef("no notification targets: add [[notify]] tables to the config file (--config) or give --notify-webhook URL")
			}
			failed := 0
			for _, r := range testTargets(cmd.Context(), targets, notifications.publicURL) {
				if r.err != nil {
					failed++
					fmt.Fprintf(cmd.OutOrStdout(), "%s: failed: %s\n", r.target, oneLine(r.err.Error()))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: delivered (%d)\n", r.target, r.code)
			}
			if failed > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
	fs, t := useSettings(cmd, controlPlaneSettings), controlPlaneSettings
	t.bind(fs, "data-dir", &dir)
	notifications.bind(fs, t)
	return cmd
}

// testResult is how a test notification to a target went.
type testResult struct {
	target string
	code   int
	err    error
}

// testTargets sends one test notification to every target at once, and
// says how each went, in the targets' order.
func testTargets(ctx context.Context, targets []notify.Target, link string) []testResult {
	id := make([]byte, 16)
	rand.Read(id)
	now := time.Now()
	body, err := json.Marshal(notify.Test(hex.EncodeToString(id), link, now))
	if err != nil {
		panic(err) // a struct of strings
	}
	client := notify.NewClient()
	out := make([]testResult, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, notify.DefaultSendTimeout)
			defer cancel()
			code, err := notify.Send(sctx, client, t, body, now)
			out[i] = testResult{target: t.Name, code: code, err: err}
		})
	}
	wg.Wait()
	return out
}
