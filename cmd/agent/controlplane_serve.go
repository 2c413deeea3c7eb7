package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/state"
)

func newControlPlaneCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "controlplane", Short: "The reference control plane"}
	cmd.AddCommand(newControlPlaneServeCmd())
	return cmd
}

func newControlPlaneServeCmd() *cobra.Command {
	var (
		addr, dir, tokenFile, logLevel string
		lease, heartbeat, stall, queue time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the reference control plane API",
		Long: `serve runs the reference control plane: tasks, leases, idempotent events, the
watchdog and health-aware claims, kept in files under --data-dir.

Without --token-file it makes a token, writes it to DIR/token (0600), and says
where; give that file to agents and to agent submit.

Every flag can also be set in the environment as AGENT_CP_ and the flag's
name in capitals: --data-dir is AGENT_CP_DATA_DIR.`,
		Example: `  agent controlplane serve --addr 127.0.0.1:8080 --data-dir ./cp`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnvPrefix(cmd, "AGENT_CP_"); err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), logLevel)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
			token, where, err := serverToken(tokenFile, dir)
			if err != nil {
				return err
			}
			srv, err := controlplane.NewServer(controlplane.ServerOptions{Dir: dir, Token: token, Lease: lease, HeartbeatInterval: heartbeat,
				Limits: state.Limits{Stall: stall, Queued: queue}, Logger: log})
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			ctx := cmd.Context()
			go srv.RunWatchdog(ctx, time.Second)
			// Timeouts so that a slow or silent client cannot hold a
			// connection (and its goroutine) forever.
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
				WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				hs.Shutdown(sctx)
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "control plane listening on http://%s (token %s)\n", ln.Addr(), where)
			log.Info("control plane listening", "addr", ln.Addr().String(), "data_dir", dir)
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	fl.StringVar(&dir, "data-dir", "controlplane-data", "where tasks and events are kept")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the bearer token (default: DIR/token, made if missing)")
	fl.DurationVar(&lease, "lease", 60*time.Second, "how long a claim lasts without renewal")
	fl.DurationVar(&heartbeat, "heartbeat-interval", 10*time.Second, "the interval agents are told to use")
	fl.DurationVar(&stall, "stall-limit", state.DefaultStallLimit, "a running task with no progress this long ends")
	fl.DurationVar(&queue, "queued-limit", state.DefaultQueuedLimit, "a task queued this long expires")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// serverToken reads the token file, or makes DIR/token. It returns the
// token and where it is, never the token in a message.
func serverToken(file, dir string) (token, where string, err error) {
	if file != "" {
		token, err = readToken(file)
		return token, "from " + file, err
	}
	path := filepath.Join(dir, "token")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), "in " + path, nil
	}
	buf := make([]byte, 24)
	rand.Read(buf)
	token = hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		return "", "", fmt.Errorf("write token: %w", err)
	}
	return token, "written to " + path, nil
}
