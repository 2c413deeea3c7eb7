package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/serve"
	"github.com/edgeagent/agent/internal/logformat"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/subtask"
	"github.com/edgeagent/agent/state"
)

func newControlPlaneCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "controlplane", Short: "The reference control plane"}
	cmd.AddCommand(newControlPlaneServeCmd(), newControlPlaneNotifyCmd())
	return cmd
}

func newControlPlaneServeCmd() *cobra.Command {
	var (
		c             serve.Config
		level, format string
		stall, queue  time.Duration
		maxOutput     settings.ByteSize
		notifications notifySettings
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the reference control plane API",
		Long: `serve runs the reference control plane: tasks, leases, idempotent events, the
watchdog and health-aware claims, kept in files under --data-dir, or in
PostgreSQL with --store postgres://…, where any number of replicas behind
one address share the work (docs/controlplane.md).

HTTPS: --tls-cert and --tls-key (both PEM; the key file chmod 600) serve
the API and the web console over TLS on --addr; behind a reverse proxy
that ends TLS, leave them out (docs/console.md).

Credentials: three kinds, each doing only its own part.
  - The registration secret (--token-file; without it, DIR/token, made if
    missing) is what every agent host holds: it registers an agent id nobody
    holds, nothing else. Give it to agent run.
  - Operator tokens (--operator-token-file: one per line, one per person;
    blank lines and # comments are skipped; without it, DIR/operator-token,
    made if missing) are people's: submit, tasks ls/show/retry/cancel/reply
    --remote, agent agents. Give them to people, never to agent hosts.
  - Each agent's own token, made when it registers, kept in its
    DATA_DIR/agent-token: heartbeat, claim, events on its own leases.
Token files must be their owner's alone (chmod 600) and every token at
least 32 characters; the ones the control plane makes are 256-bit. The
state directory must be private (not writable by others, yours).

Notifications (a task waiting for a person, completed, failed or blocked;
an agent offline or unhealthy) go to generic webhooks, Slack and ntfy:
[[notify]] tables in the config file, or --notify-webhook URL for the
simplest case; agent controlplane notify test tries them
(docs/notifications.md). A target gets one of an agent's or a task's
repeats of an event per --notify-window (10m), at most
--notify-max-per-subject about one agent or task and
--notify-max-per-target in all: the rest are folded into one
notification that counts them, sent when the window ends.

Every flag can also be set in the environment as AGENT_CP_ and the flag's
name in capitals (--data-dir is AGENT_CP_DATA_DIR), or as a key in the
TOML file given by --config (AGENT_CP_CONFIG); the command line wins over
the environment, which wins over the file.`,
		Example: `  agent controlplane serve --addr 127.0.0.1:8080 --data-dir ./cp
  PGPASSWORD=… agent controlplane serve --store postgres://cp@db.internal:5432/agents --addr :8080
  agent controlplane serve --addr :8443 --tls-cert /etc/agent/cert.pem --tls-key /etc/agent/key.pem`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Subtasks: the [[delegate]] rules.
			rules, err := subtask.DelegateRules(resolvedOf(cmd))
			if err != nil {
				return err
			}
			c.Logger, c.Out = logformat.New(cmd.ErrOrStderr(), logformat.Level(level), format), cmd.OutOrStdout()
			c.Limits, c.MaxAttemptOutput, c.Delegate = state.Limits{Stall: stall, Queued: queue}, int64(maxOutput), rules
			c.Notify = notifications.of(cmd)
			return serve.Run(cmd.Context(), c)
		},
	}
	fs, t := useSettings(cmd, controlPlaneSettings), controlPlaneSettings
	t.Bind(fs, "addr", &c.Addr)
	t.Bind(fs, "replica-name", &c.ReplicaName)
	t.Bind(fs, "tls-cert", &c.TLSCert)
	t.Bind(fs, "tls-key", &c.TLSKey)
	t.Bind(fs, "data-dir", &c.DataDir)
	t.Bind(fs, "store", &c.StoreURL)
	t.Bind(fs, "retention", &c.Retention)
	t.Bind(fs, "token-file", &c.TokenFile)
	t.Bind(fs, "operator-token-file", &c.OperatorFile)
	t.Bind(fs, "lease", &c.Lease)
	t.Bind(fs, "heartbeat-interval", &c.HeartbeatInterval)
	t.Bind(fs, "stall-limit", &stall)
	t.Bind(fs, "queued-limit", &queue)
	t.Bind(fs, "max-attempt-output", &maxOutput)
	t.Bind(fs, "metrics-addr", &c.MetricsAddr)
	notifications.bind(fs, t)
	t.Bind(fs, "notify-window", &c.NotifyLimits.Window)
	t.Bind(fs, "notify-max-per-subject", &c.NotifyLimits.PerSubject)
	t.Bind(fs, "notify-max-per-target", &c.NotifyLimits.PerTarget)
	t.Bind(fs, "log-level", &level)
	t.Bind(fs, "log-format", &format)
	return cmd
}
