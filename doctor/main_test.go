package doctor

import (
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
// for isolation none.
func TestDoctorSaysTheIsolation(t *testing.T) {
	c := checkIsolation(Options{DataDir: t.TempDir(), Isolation: isolation.Config{Mode: isolation.None}})
	if c.Result != CheckWarn || !strings.Contains(c.Fix, "drop --isolation none") {
		t.Errorf("isolation none: %+v", c)
	}
	c = checkIsolation(Options{DataDir: t.TempDir()})
	if want := CheckPass; landlock.ABI() == 0 {
		want = CheckWarn
		if c.Result != want {
			t.Errorf("no Landlock: %+v", c)
		}
	} else if c.Result != want || !strings.HasPrefix(c.Detail, "landlock (ABI ") {
		t.Errorf("with Landlock: %+v", c)
	}
	c = checkIsolation(Options{DataDir: t.TempDir(), Isolation: isolation.Config{Mode: "sometimes"}})
	if c.Result != CheckFail || !strings.HasPrefix(c.Detail, `isolation "sometimes": want auto`) {
		t.Errorf("a bad mode: %+v", c)
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
