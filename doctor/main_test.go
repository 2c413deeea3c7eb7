package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/isolation"
)

// TestMain makes the test binary a keeper, as the agent's is (the
// isolation check says what the agent would do), and checks that no
// goroutine outlives the tests.
func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	goleak.VerifyTestMain(m)
}

// The doctor says how attempts would be confined: a warning, with the fix,
// for isolation none; then what tasks are denied, or that nothing is.
func TestDoctorSaysTheIsolation(t *testing.T) {
	cs := checkIsolation(Options{DataDir: t.TempDir(), Isolation: isolation.Config{Mode: isolation.None}})
	if c := cs[0]; c.Result != CheckWarn || !strings.Contains(c.Fix, "drop --isolation none") {
		t.Errorf("isolation none: %+v", c)
	}
	if c := cs[1]; c.Name != CheckDenied || c.Result != CheckSkip || !strings.Contains(c.Detail, "not confined") {
		t.Errorf("isolation none, what is denied: %+v", c)
	}
	cs = checkIsolation(Options{DataDir: t.TempDir()})
	if want := CheckPass; landlock.ABI() == 0 {
		want = CheckWarn
		if cs[0].Result != want {
			t.Errorf("no Landlock: %+v", cs[0])
		}
	} else if cs[0].Result != want || !strings.HasPrefix(cs[0].Detail, "landlock (ABI ") || cs[1].Result != CheckPass {
		t.Errorf("with Landlock: %+v", cs)
	}
	cs = checkIsolation(Options{DataDir: t.TempDir(), Isolation: isolation.Config{Mode: "sometimes"}})
	if c := cs[0]; c.Result != CheckFail || !strings.HasPrefix(c.Detail, `isolation "sometimes": want auto`) {
		t.Errorf("a bad mode: %+v", c)
	}
	cs = checkIsolation(Options{DataDir: t.TempDir(), Isolation: isolation.Config{Allow: []string{"/etc"}}})
	if c := cs[0]; c.Result != CheckFail || !strings.HasPrefix(c.Detail, "isolation-allow /etc: not on the default deny list") || !strings.Contains(c.Fix, "drop that --isolation-allow") {
		t.Errorf("an isolation-allow of a path off the list: %+v", c)
	}
}

// What tasks are denied, in one line: the agent's own paths (a control
// plane's state directory and the operator's denials said as such), the
// credentials that exist, and how many more do not.
func TestDoctorSaysWhatIsDenied(t *testing.T) {
	home, _ := os.UserHomeDir()
	c := checkDenied([]isolation.Denied{
		{Path: "/srv/agent", Why: "the agent's data directory", Exists: true},
		{Path: "/srv/cp", Why: "a control plane's state directory: operator tokens, the key that signs task tokens", Exists: true},
		{Path: "/srv/keys", Why: "isolation-deny"},
		{Path: filepath.Join(home, ".ssh"), Why: "SSH keys", Credential: true, Exists: true},
		{Path: "/elsewhere/.aws", Why: "AWS", Credential: true, Exists: true},
		{Path: filepath.Join(home, ".netrc"), Why: "logins", Credential: true},
		{Path: filepath.Join(home, ".kube"), Why: "clusters", Credential: true},
	})
	want := "to tasks: the agent's /srv/agent, /srv/cp (a control plane's state), /srv/keys (isolation-deny); credentials: ~/.ssh, /elsewhere/.aws; 2 more absent, denied if made (--isolation-allow lifts one)"
	if c.Result != CheckPass || c.Detail != want {
		t.Errorf("got %+v\nwant detail %q", c, want)
	}
}

// The doctor says how attempts' network is confined and who they run as:
// a warning, with the fix, for egress open; a failure for a bad rule.
func TestDoctorSaysTheEgressAndTheTaskUser(t *testing.T) {
	c := checkEgress(Options{DataDir: t.TempDir(), Isolation: isolation.Config{Egress: isolation.EgressOpen}})
	if c.Result != CheckWarn || !strings.Contains(c.Fix, "drop --egress open") {
		t.Errorf("egress open: %+v", c)
	}
	c = checkEgress(Options{DataDir: t.TempDir(), Isolation: isolation.Config{EgressAllow: []string{"http://x"}}})
	if c.Result != CheckFail || !strings.Contains(c.Detail, "egress allow: ") {
		t.Errorf("a bad rule: %+v", c)
	}
	if keeper.ProbeEgress() == nil {
		if c := checkEgress(Options{DataDir: t.TempDir()}); c.Result != CheckPass {
			t.Errorf("egress auto: %+v", c)
		}
	}
	c = checkTaskUser(Options{DataDir: t.TempDir()})
	if c.Result != CheckPass || !strings.HasPrefix(c.Detail, "tasks run as ") {
		t.Errorf("task user: %+v", c)
	}
	c = checkTaskUser(Options{DataDir: t.TempDir(), Isolation: isolation.Config{TaskUser: "no-such-user-here"}})
	if c.Result != CheckFail {
		t.Errorf("a task user that is not there: %+v", c)
	}
}
