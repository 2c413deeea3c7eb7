package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/agentview"
)

func newStopCmd() *cobra.Command {
	var (
		dataDir     string
		now, noWait bool
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Ask the agent running on a data directory to drain and stop",
		Long: `stop sends SIGTERM to the agent running on the data directory: it claims
nothing more, leaves running attempts to their keepers (--reattach-grace,
default 5m: they go on without the agent, and its next start within that
time re-attaches to them, nothing cut), flushes the outbox, tells the
control plane it is offline and exits. With --reattach-grace 0, or an
attempt that cannot outlive the agent, running tasks finish for its
--drain-timeout and what still runs is cancelled. stop waits for that,
saying each second what is still running, unless --no-wait, then which
tasks the agent takes up when it starts again: a task whose attempt goes on
is re-attached; a task stopped before it had done anything runs its attempt
again from the start; one that had (a side effect, a tool call, output)
continues its CLI session, when its executor keeps one, and is otherwise
left recoverable_failed for a person (agent tasks continue, agent tasks
retry). --now sends SIGQUIT instead: it stops at once, pending records
staying on disk; running attempts go on and are re-attached as at a stop,
or, with --reattach-grace 0, are cancelled at once.

The process signalled is the one the kernel names as the holder of the data
directory's lock (/proc/locks), never merely the one DATA_DIR/agent.pid
names: a task runs as the agent's user and could rewrite that file. A pid
file naming another process is reported and that process left alone; a
lock whose holder the kernel does not name is an error, and nothing is
signalled. On macOS, which names no lock holder, the pid file is used
while the lock is held; prefer agent service stop there.

With no --data-dir (nor AGENT_DATA_DIR, nor data-dir in the config file),
the data directory is the installed service's (agent service install), else
the default.

Under systemd, prefer systemctl stop (or agent service stop): it sends the
same signal and the unit's stop timeout covers the drain.`,
		Example: `  agent stop
  agent stop --data-dir ~/agent-b --timeout 5m
  agent stop --now`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return agentview.Stop(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(),
				agentview.StopOptions{DataDir: dataDir, Now: now, NoWait: noWait, Timeout: timeout, Tick: time.Second, Bin: invokedAs()})
		},
	}
	dataDirFlag(cmd, &dataDir)
	fl := cmd.Flags()
	fl.BoolVar(&now, "now", false, "stop at once (SIGQUIT): no drain; running attempts are re-attached at the next start, or cancelled with --reattach-grace 0")
	fl.BoolVar(&noWait, "no-wait", false, "send the signal and return")
	fl.DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the agent to exit")
	return cmd
}
