package agentsettings

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTablesAreConsistent checks what every setting of both tables must
// be: one name, one file key and one environment variable each, a help
// line, a default its own checks take, and an alias only for a duration.
func TestTablesAreConsistent(t *testing.T) {
	for _, table := range []*settings.Table{Agent, ControlPlane} {
		names, keys, envs := map[string]bool{}, map[string]bool{}, map[string]bool{}
		for _, s := range table.List {
			for seen, v := range map[*map[string]bool]string{&names: s.Name, &keys: s.FileKey(), &envs: s.EnvName(table.EnvPrefix)} {
				if (*seen)[v] {
					t.Errorf("%s%s: %q twice", table.EnvPrefix, s.Name, v)
				}
				(*seen)[v] = true
			}
			if s.Help == "" || strings.Contains(s.Help, "\n") {
				t.Errorf("%s%s: help %q, want one line", table.EnvPrefix, s.Name, s.Help)
			}
			if err := s.Check(s.DefaultValue()); err != nil {
				t.Errorf("%s%s: the default %v is refused: %v", table.EnvPrefix, s.Name, s.DefaultValue(), err)
			}
			if s.Alias != "" {
				if _, ok := s.Default.(time.Duration); !ok {
					t.Errorf("%s%s: an alias on a %T", table.EnvPrefix, s.Name, s.Default)
				}
			}
		}
	}
	if Agent.EnvPrefix == ControlPlane.EnvPrefix || !strings.HasPrefix(ControlPlane.EnvPrefix, Agent.EnvPrefix) {
		t.Errorf("prefixes %q and %q: the control plane's must be its own, under the agent's", Agent.EnvPrefix, ControlPlane.EnvPrefix)
	}
	if ControlPlane.DefaultFile != nil {
		t.Error("the control plane reads a config file only when named")
	}
}

// TestWhatDecidesReachIsNeverLive: a file a task could write must not
// change under a running agent what the task may reach.
func TestWhatDecidesReachIsNeverLive(t *testing.T) {
	for _, name := range []string{"executor", "executor-command", "executor-bin", "executor-arg", "executor-env", "approval",
		"codex-sandbox", "claude-allowed-tools", "claude-permission-mode", "isolation", "isolation-deny", "isolation-allow",
		"isolation-write", "egress", "egress-allow", "task-user", "control-plane", "token-file", "data-dir", "work-dir", "repo"} {
		s := Agent.Lookup(name)
		if s == nil {
			t.Errorf("no setting %s", name)
			continue
		}
		if s.Live {
			t.Errorf("%s is live", name)
		}
	}
}

// TestRunBindsEveryLiveSetting: a reload applies Run's Live, so every live
// setting must be one of Run's, and Run binds only the agent's settings.
func TestRunBindsEveryLiveSetting(t *testing.T) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var r Run
	r.Bind(fs)
	for _, s := range Agent.List {
		if s.Live && fs.Lookup(s.Name) == nil {
			t.Errorf("live setting %s is not Run's", s.Name)
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if Agent.Lookup(f.Name) == nil && !slices.ContainsFunc(Agent.List, func(s *settings.Setting) bool { return s.Alias == f.Name }) {
			t.Errorf("Run binds --%s, not a setting of the agent's", f.Name)
		}
	})
}

func TestRunMakesWhatItsSettingsSay(t *testing.T) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var r Run
	r.Bind(fs)
	err := fs.Parse([]string{"--executor", "claude", "--executor-arg=-x", "--claude-limit-wait", "2m", "--max-retries", "4",
		"--on-side-effect", "ask", "--default-max-tokens", "1000", "--default-max-time", "1h", "--shutdown-grace", "7s",
		"--models", "a,b", "--max-concurrent", "3", "--retention-max-size", "1MiB", "--egress", "open", "--task-user", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Executor.Kind != "claude" || !slices.Equal(r.Executor.Args, []string{"-x"}) || r.Executor.ClaudeLimitWait != 2*time.Minute {
		t.Errorf("executor settings %+v", r.Executor)
	}
	if p := r.Policy(); p.MaxAttempts != 5 || p.OnSideEffect != state.OnSideEffectAsk {
		t.Errorf("policy %+v, want 5 attempts and ask", p)
	}
	if r.DrainTimeout != 7*time.Second {
		t.Errorf("--shutdown-grace gave a drain timeout of %s", r.DrainTimeout)
	}
	if b := r.Budget(); b != (runner.Budget{MaxTokens: 1000, MaxTime: time.Hour}) {
		t.Errorf("budget %+v", b)
	}
	must(t, fs.Parse([]string{"--no-retry"}))
	if p := r.Policy(); p.MaxAttempts != 1 {
		t.Errorf("--no-retry: %d attempts", p.MaxAttempts)
	}
	iso := isolation.Config{Mode: isolation.Landlock}
	c := r.Config(agent.Config{ControlPlane: "https://cp", DataDir: "/d"}, iso)
	if c.ControlPlane != "https://cp" || c.DataDir != "/d" || c.ExecutorKind != "claude" || c.MaxConcurrent != 3 ||
		!slices.Equal(c.Models, []string{"a", "b"}) || c.RetentionMaxBytes != 1<<20 || c.Isolation.Mode != isolation.Landlock ||
		c.ShutdownGrace != 7*time.Second || c.Policy.MaxAttempts != 1 || c.Budget.MaxTokens != 1000 {
		t.Errorf("agent config %+v", c)
	}
	live := r.Live(nil)
	if live.MaxConcurrent != 3 || live.Policy.MaxAttempts != c.Policy.MaxAttempts || live.ApprovalTimeout != c.ApprovalTimeout {
		t.Errorf("live %+v against config %+v", live, c)
	}
}

// TestIsolationProtectsTheAgentsFiles: the token files the config file,
// the environment and a control plane's environment name are out of reach,
// each once.
func TestIsolationProtectsTheAgentsFiles(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "agent.toml")
	must(t, os.WriteFile(config, []byte("token-file = \"ops-token\"\noperator-token-file = \"/flag/token\"\n"), 0o600))
	t.Setenv("AGENT_TOKEN_FILE", "/env/token")
	t.Setenv("AGENT_OPERATOR_TOKEN_FILE", "")
	t.Setenv("AGENT_CP_TOKEN_FILE", "/cp/registration")
	t.Setenv("AGENT_CP_OPERATOR_TOKEN_FILE", "")
	t.Setenv("AGENT_CP_NOTIFY_SECRET_FILE", "")
	t.Setenv("AGENT_CP_TLS_KEY", "/cp/tls.key")
	t.Setenv("AGENT_CP_DATA_DIR", "")
	r := Run{Isolation: "none", Egress: "open", IsolationDeny: []string{"/secret"}}
	iso := r.IsolationOf(config, "/flag/token", []string{"/srv/other", "/env/token"})
	want := []string{config, "/flag/token", "/env/token", filepath.Join(dir, "ops-token"), "/cp/registration", "/cp/tls.key", "/srv/other"}
	if !slices.Equal(iso.Protect, want) {
		t.Errorf("protected %v, want %v", iso.Protect, want)
	}
	if !slices.Equal(iso.ControlPlaneDirs, []string{"", "controlplane-data"}) {
		t.Errorf("control plane directories %v", iso.ControlPlaneDirs)
	}
	if iso.Mode != isolation.None || iso.Egress != isolation.EgressOpen || !slices.Equal(iso.Deny, []string{"/secret"}) {
		t.Errorf("isolation %+v", iso)
	}
}

func TestRepos(t *testing.T) {
	wd, err := os.Getwd()
	must(t, err)
	home, err := os.UserHomeDir()
	must(t, err)
	got := Repos([]string{"a=/srv/a", "b=rel/b", "c=~/c"})
	want := []string{"a=/srv/a", "b=" + filepath.Join(wd, "rel/b"), "c=" + filepath.Join(home, "c")}
	var gotText []string
	for _, r := range got {
		gotText = append(gotText, r.Name+"="+r.Path)
	}
	if !slices.Equal(gotText, want) {
		t.Errorf("repos %v, want %v", gotText, want)
	}
}

func TestRedactHidesPasswordsInURLs(t *testing.T) {
	for _, key := range []string{"control-plane", "repo.api_url"} {
		if got := Redact(key, "https://me:hunter2@cp.example.com"); strings.Contains(got, "hunter2") {
			t.Errorf("%s: %q shows the password", key, got)
		}
	}
	if got := Redact("commit-author", "me:hunter2@x"); got != "me:hunter2@x" {
		t.Errorf("another key changed: %q", got)
	}
}

func TestDefaultDataDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	if d := DefaultDataDir(); d != "/state/agent" {
		t.Errorf("data dir %q", d)
	}
	t.Setenv("XDG_STATE_HOME", "")
	home, err := os.UserHomeDir()
	must(t, err)
	if d := DefaultDataDir(); d != filepath.Join(home, ".local", "state", "agent") {
		t.Errorf("data dir %q", d)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPrintConfigShowsNoSecret: config print says where the token comes
// from, never the token, and hides a password in the control plane's URL.
func TestPrintConfigShowsNoSecret(t *testing.T) {
	t.Setenv("AGENT_TOKEN", "the-registration-secret-of-32-characters")
	fs := pflag.NewFlagSet("print", pflag.ContinueOnError)
	var r Run
	var controlPlane string
	Agent.Bind(fs, "control-plane", &controlPlane)
	r.Bind(fs)
	must(t, fs.Parse([]string{"--control-plane", "https://me:hunter2@cp.example.com", "--max-concurrent", "3"}))
	resolved, err := Agent.Resolve(fs, "", func(string) (string, bool) { return "", false })
	must(t, err)
	var out strings.Builder
	must(t, PrintConfig(&out, resolved, fs, ""))
	text := out.String()
	if strings.Contains(text, "hunter2") || strings.Contains(text, "the-registration-secret") {
		t.Errorf("config print shows a secret:\n%s", text)
	}
	if !strings.Contains(text, "from AGENT_TOKEN (not shown)") || !strings.Contains(text, "max-concurrent = 3") {
		t.Errorf("config print:\n%s", text)
	}
	out.Reset()
	must(t, PrintConfig(&out, resolved, fs, "/etc/agent/token"))
	if !strings.Contains(out.String(), "read from token-file /etc/agent/token") {
		t.Errorf("config print with a token file:\n%s", out.String())
	}
}
