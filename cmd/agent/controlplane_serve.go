package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/controlplane/store/pgstore"
	"github.com/edgeagent/agent/internal/private"
	"github.com/edgeagent/agent/internal/subtask"
	"github.com/edgeagent/agent/metrics"
	"github.com/edgeagent/agent/state"
)

func newControlPlaneCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "controlplane", Short: "The reference control plane"}
	cmd.AddCommand(newControlPlaneServeCmd(), newControlPlaneNotifyCmd())
	return cmd
}

func newControlPlaneServeCmd() *cobra.Command {
	var (
		addr, dir, storeURL, tokenFile, operatorFile, level, format, metricsAddr string
		replicaName                                                              string
		lease, heartbeat, stall, queue, retention                                time.Duration
		maxOutput                                                                byteSize
		notifications                                                            notifySettings
		limits                                                                   notify.Options // the notifications' rate limits
	)
	var tlsCert, tlsKey string // --tls-cert, --tls-key: HTTPS when given
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
			log := newLogger(cmd.ErrOrStderr(), logLevel(level), format)
			tlsConf, err := serveTLS(tlsCert, tlsKey)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
			// Before a token is written there: nobody else may read or
			// plant files in it.
			if err := private.Dir("state directory", dir); err != nil {
				return err
			}
			token, where, err := serverToken(tokenFile, dir)
			if err != nil {
				return err
			}
			operators, opWhere, err := operatorTokens(operatorFile, dir)
			if err != nil {
				return err
			}
			if err := notifications.checkPublicURL(); err != nil {
				return err
			}
			targets, err := notifications.targets(resolvedOf(cmd), dir, true)
			if err != nil {
				return err
			}
			// Subtasks: the [[delegate]] rules.
			rules, err := subtask.DelegateRules(resolvedOf(cmd))
			if err != nil {
				return err
			}
			st, storeWhere, err := openStore(cmd.Context(), storeURL, dir, log)
			if err != nil {
				return err
			}
			defer st.Close()
			srv, err := server.New(server.Options{Store: st, Token: token, OperatorTokens: operators, Lease: lease, HeartbeatInterval: heartbeat,
				Limits: state.Limits{Stall: stall, Queued: queue}, MaxAttemptOutput: int64(maxOutput), Retention: retention, Logger: log,
				PublicURL: notifications.publicURL, Notify: serverTargets(targets), Delegate: rules, Replica: replicaNameOf(replicaName, addr)})
			if err != nil {
				return err
			}
			defer srv.Close()
			log.Info("control plane store", "store", storeWhere)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			ctx := cmd.Context()
			go srv.RunWatchdog(ctx, time.Second)
			logTargets(log, targets, notifications.secretWhere)
			counts := notify.NewCounts(targets)
			defer startNotify(ctx, srv.Store(), targets, counts, log, limits)()
			// Timeouts so that a slow or silent client cannot hold a
			// connection (and its goroutine) forever.
			handler := srv.Handler()
			if metricsAddr != "" {
				m := metrics.NewControlPlane(srv)
				m.Overload(srv)
				if len(targets) > 0 {
					m.Notifications(counts)
				}
				handler = m.Instrument(handler)
				ms, err := metrics.Listen(metricsAddr, m.Registry())
				if err != nil {
					return err
				}
				defer ms.Close()
				log.Info("serving metrics", "url", "http://"+ms.Addr()+"/metrics")
			}
			hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
				WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, TLSConfig: tlsConf}
			// Claims waiting for work answer at once: the shutdown waits
			// for requests in flight.
			hs.RegisterOnShutdown(srv.StopWaits)
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				hs.Shutdown(sctx)
			}()
			scheme := "http"
			if tlsConf != nil {
				scheme = "https"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "control plane listening on %s://%s (registration secret for agents %s; operator tokens for people %s)\n", scheme, ln.Addr(), where, opWhere)
			log.Info("control plane listening", "addr", ln.Addr().String(), "data_dir", dir, "tls", tlsConf != nil)
			serve := hs.Serve
			if tlsConf != nil {
				serve = func(ln net.Listener) error { return hs.ServeTLS(ln, "", "") }
			}
			if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	fs, t := useSettings(cmd, controlPlaneSettings), controlPlaneSettings
	t.bind(fs, "addr", &addr)
	t.bind(fs, "replica-name", &replicaName)
	t.bind(fs, "tls-cert", &tlsCert)
	t.bind(fs, "tls-key", &tlsKey)
	t.bind(fs, "data-dir", &dir)
	t.bind(fs, "store", &storeURL)
	t.bind(fs, "retention", &retention)
	t.bind(fs, "token-file", &tokenFile)
	t.bind(fs, "operator-token-file", &operatorFile)
	t.bind(fs, "lease", &lease)
	t.bind(fs, "heartbeat-interval", &heartbeat)
	t.bind(fs, "stall-limit", &stall)
	t.bind(fs, "queued-limit", &queue)
	t.bind(fs, "max-attempt-output", &maxOutput)
	t.bind(fs, "metrics-addr", &metricsAddr)
	notifications.bind(fs, t)
	t.bind(fs, "notify-window", &limits.Window)
	t.bind(fs, "notify-max-per-subject", &limits.PerSubject)
	t.bind(fs, "notify-max-per-target", &limits.PerTarget)
	t.bind(fs, "log-level", &level)
	t.bind(fs, "log-format", &format)
	return cmd
}

// serverToken reads the registration secret's file, or DIR/token, made if
// missing. It returns the token and where it is, never the token in a
// message.
func serverToken(file, dir string) (token, where string, err error) {
	if file != "" {
		token, err = readTokenFile("token file", file, true)
		return token, "from " + file, err
	}
	return ownToken("registration secret", filepath.Join(dir, "token"))
}

// operatorTokens reads the operator token file, or DIR/operator-token,
// made if missing, and says where they are.
func operatorTokens(file, dir string) ([]string, string, error) {
	if file != "" {
		toks, err := readOperatorTokens(file)
		return toks, fmt.Sprintf("from %s (%d)", file, len(toks)), err
	}
	tok, where, err := ownToken("operator token", filepath.Join(dir, "operator-token"))
	return []string{tok}, where, err
}

// openStore opens the store --store names: nil for the file store (the
// server opens it in the data directory), or PostgreSQL. where says which,
// for the log, without a password.
func openStore(ctx context.Context, url, dir string, log *slog.Logger) (store.Store, string, error) {
	switch {
	case url == "":
		st, err := filestore.Open(dir, filestore.Options{Logger: log})
		if err != nil {
			return nil, "", err
		}
		return st, "files in the data directory", nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		st, err := pgstore.Open(ctx, url, pgstore.Options{Logger: log})
		if err != nil {
			return nil, "", fmt.Errorf("--store: %w", err)
		}
		return st, "postgresql " + redactURL(url), nil
	default:
		return nil, "", fmt.Errorf("--store %q: want empty (files in the data directory) or a postgres:// URL", redactURL(url))
	}
}

// replicaNameOf is the replica's name: name, or this host's name and the
// port of the address it listens on (its host when it names one).
func replicaNameOf(name, addr string) string {
	if name != "" {
		return name
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host, _ = os.Hostname()
	}
	return net.JoinHostPort(host, port)
}
