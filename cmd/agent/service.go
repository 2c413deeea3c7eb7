package main

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
)

func newServiceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Make `agent run` a systemd service (a launchd agent on macOS)",
		Long: `service print writes, and service install installs, a systemd unit (a launchd
plist on macOS) that runs agent run with the flags given after --. The
unit names the token file; it never holds the token.`,
	}
	cmd.AddCommand(newServicePrintCmd(), newServiceInstallCmd())
	return cmd
}

// serviceSpec is what a unit or plist is made from.
type serviceSpec struct {
	binary string
	args   []string // the flags of agent run
	system bool     // a system unit rather than a user one
}

func specFrom(args []string, system bool) (serviceSpec, error) {
	for _, a := range args {
		if i := strings.IndexFunc(a, unicode.IsControl); i >= 0 {
			return serviceSpec{}, usagef("flag %q holds a control character (%U); a unit is line-based and would be broken by it", visible(a), a[i])
		}
	}
	// The flags must be agent run's, and valid: a unit that fails to start
	// is found out late.
	run := newRunCmd()
	run.SetArgs(args)
	if err := run.ParseFlags(args); err != nil {
		return serviceSpec{}, usagef("agent run would refuse these flags: %v", err)
	}
	if rest := run.Flags().Args(); len(rest) > 0 {
		return serviceSpec{}, usagef("agent run takes no arguments, only flags: %q", rest)
	}
	if !slices.ContainsFunc(args, func(a string) bool { return a == "--token-file" || strings.HasPrefix(a, "--token-file=") }) {
		return serviceSpec{}, usagef("give agent run's flags after --, with --token-file (a service never holds the token itself)")
	}
	if !slices.ContainsFunc(args, func(a string) bool { return a == "--control-plane" || strings.HasPrefix(a, "--control-plane=") }) {
		return serviceSpec{}, usagef("give agent run's flags after --, with --control-plane URL")
	}
	self, err := os.Executable()
	if err != nil {
		return serviceSpec{}, err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return serviceSpec{}, err
	}
	return serviceSpec{binary: self, args: args, system: system}, nil
}

// systemdUnit renders the unit. Stopping gets the shutdown grace, the kill
// grace and the flush before systemd sends SIGKILL.
func (s serviceSpec) systemdUnit() string {
	words := []string{systemdQuote(s.binary), "run"}
	for _, a := range s.args {
		words = append(words, systemdQuote(a))
	}
	target := "default.target"
	if s.system {
		target = "multi-user.target"
	}
	return fmt.Sprintf(`[Unit]
Description=Edge agent: runs control plane tasks on this machine
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
ExecStart=%s
Restart=on-failure
RestartSec=5s
WatchdogSec=60s
TimeoutStopSec=45s
KillMode=mixed

[Install]
WantedBy=%s
`, strings.Join(words, " "), target)
}

// systemdQuote quotes a word for ExecStart when it needs it.
func systemdQuote(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\"'\\$%;") {
		return w
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(w) + `"`
}

// launchdPlist renders a launchd agent.
func (s serviceSpec) launchdPlist() string {
	var b strings.Builder
	for _, a := range append([]string{s.binary, "run"}, s.args...) {
		fmt.Fprintf(&b, "\n    <string>%s</string>", html.EscapeString(a))
	}
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>dev.edgeagent.agent</string>
  <key>ProgramArguments</key>
  <array>%s
  </array>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <true/>
  <key>ExitTimeOut</key>
  <integer>45</integer>
</dict>
</plist>
`, b.String())
}

func (s serviceSpec) render() string {
	if runtime.GOOS == "darwin" {
		return s.launchdPlist()
	}
	return s.systemdUnit()
}

// path is where install puts the file.
func (s serviceSpec) path() (string, error) {
	home, err := os.UserHomeDir()
	switch {
	case runtime.GOOS == "darwin" && err == nil:
		return filepath.Join(home, "Library", "LaunchAgents", "dev.edgeagent.agent.plist"), nil
	case s.system:
		return "/etc/systemd/system/agent.service", nil
	case err != nil:
		return "", err
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "systemd", "user", "agent.service"), nil
	}
	return filepath.Join(home, ".config", "systemd", "user", "agent.service"), nil
}

func (s serviceSpec) nextSteps() string {
	switch {
	case runtime.GOOS == "darwin":
		return "launchctl load -w ~/Library/LaunchAgents/dev.edgeagent.agent.plist"
	case s.system:
		return "systemctl daemon-reload && systemctl enable --now agent"
	}
	return "systemctl --user daemon-reload && systemctl --user enable --now agent"
}

func newServicePrintCmd() *cobra.Command {
	var system bool
	cmd := &cobra.Command{
		Use:     "print [--system] -- RUN-FLAGS...",
		Short:   "Print the systemd unit (launchd plist on macOS) for agent run",
		Example: `  agent service print -- --control-plane https://cp.example.com --token-file /etc/agent/token --executor sample`,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := specFrom(args, system)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), spec.render())
			return nil
		},
	}
	cmd.Flags().BoolVar(&system, "system", false, "a system unit (multi-user.target) rather than a user one")
	return cmd
}

func newServiceInstallCmd() *cobra.Command {
	var system bool
	cmd := &cobra.Command{
		Use:   "install [--system] -- RUN-FLAGS...",
		Short: "Install the unit (plist on macOS) and say how to start it",
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := specFrom(args, system)
			if err != nil {
				return err
			}
			path, err := spec.path()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(path, []byte(spec.render()), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s\nstart it with: %s\n", path, spec.nextSteps())
			return nil
		},
	}
	cmd.Flags().BoolVar(&system, "system", false, "install a system unit in /etc/systemd/system (needs root)")
	return cmd
}
