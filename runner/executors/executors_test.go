package executors

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/runner"
)

// Each mistake in the executor's settings is a usage error (the agent
// exits 2, not restarted in a loop) saying which setting is wrong.
func TestBuildRefusesBadSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{Kind: "exec"}, "--executor exec needs --executor-command"},
		{Settings{Kind: "exec", Command: "   "}, "--executor exec needs --executor-command"},
		{Settings{Kind: "exec", Command: `cli "unclosed`}, "--executor-command: unterminated quote"},
		{Settings{Kind: "exec", Command: "cli", Bin: "/bin/true"}, "--executor-bin and --executor-arg go with --executor codex, claude, opencode or acp"},
		{Settings{Kind: "sample", Args: []string{"-x"}}, "--executor-bin and --executor-arg go with"},
		{Settings{Kind: "exec", Command: "cli", Env: []string{"BAD NAME"}}, "--executor-env:"},
		{Settings{Kind: "acp"}, "--executor acp needs --executor-bin"},
		{Settings{Kind: "codex", CodexSandbox: "everything"}, `sandbox "everything"`},
		{Settings{Kind: "claude", Approval: "ask", ClaudePermission: "bypassPermissions"}, "--approval ask with --executor claude:"},
		{Settings{Kind: "shell"}, `--executor "shell": want exec, codex, claude, opencode, acp or sample`},
	} {
		_, err := c.s.Build()
		var ue settings.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want a usage error with %q", c.s, err, c.want)
		}
	}
}

// What each kind builds runs what the settings say: an exec command split
// as a shell would (never run by one), the sample executor and Claude
// Code's prompt tool from this binary, opencode over ACP with its acp
// subcommand said once.
func TestBuildRunsWhatTheSettingsSay(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{Kind: "exec", Command: `/bin/echo 'a b' c\ d`}, "exec (/bin/echo a b c d)"},
		{Settings{Kind: "sample", KillGrace: time.Second}, " " + SampleCommand + ")"},
		{Settings{Kind: "codex", Bin: "/opt/codex"}, "codex app-server (/opt/codex"},
		{Settings{Kind: "acp", Bin: "/opt/opencode", Args: []string{"acp", "--verbose"}}, "OpenCode over ACP (/opt/opencode"},
	} {
		exe, err := c.s.Build()
		if err != nil {
			t.Errorf("%+v: %v", c.s, err)
			continue
		}
		if got := runner.Describe(exe); !strings.Contains(got, c.want) || strings.Count(got, " acp ") > 1 {
			t.Errorf("%+v: runs %q, want %q in it", c.s, got, c.want)
		}
	}
}

// Codex asked to ask must have something to ask about: a sandbox of its
// own, or the agent's confinement.
func TestCheckAsks(t *testing.T) {
	t.Parallel()
	open := Settings{Kind: "codex", Approval: "ask", CodexSandbox: "danger-full-access"}
	if err := open.CheckAsks(false); err == nil || !strings.HasPrefix(err.Error(), "--approval ask: ") {
		t.Errorf("codex without a sandbox or confinement, asked to ask: %v", err)
	}
	if err := open.CheckAsks(true); err != nil {
		t.Errorf("confined: %v", err)
	}
	if err := (Settings{Kind: "codex", Approval: "ask", CodexSandbox: "workspace-write"}).CheckAsks(false); err != nil {
		t.Errorf("codex's own sandbox: %v", err)
	}
	if got := (Settings{}).RunnerApprovalTimeout(); got >= 0 {
		t.Errorf("--approval-timeout 0 (for ever) is %v to the runner, want negative", got)
	}
	if got := (Settings{ApprovalTimeout: time.Minute}).RunnerApprovalTimeout(); got != time.Minute {
		t.Errorf("--approval-timeout 1m is %v to the runner", got)
	}
}
