package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeagent/agent/state"
)

// At --log-level debug the agent says why it decided what it did: what a
// claim got, and how a failed attempt was judged (retried, then blocked
// by the gate after a side effect). The start banner names the real
// executor.
func TestDebugLogsExplainDecisions(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	ag := startAgentProc(t, c, t.TempDir(), "--log-level", "debug")
	retried := submit(t, c, "Summarize\n@fail rate_limit")
	gated := submit(t, c, "Deploy\n@side-effect wrote deploy.yaml\n@fail network\n@no-session")
	if v := c.waitDone(t, retried); v.Phase != state.PhaseCompleted {
		t.Fatalf("retried task ended %s", v.Phase)
	}
	if v := c.waitDone(t, gated); v.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("gated task ended %s", v.Phase)
	}
	ag.stop()
	out := ag.output()
	for _, want := range []string{
		`"msg":"agent starting"`,
		`"executor":"exec (` + os.Args[0],
		`"msg":"claim answered"`,
		`"msg":"attempt judged","task":"` + retried + `","attempt":1,"code":"rate_limit","technically_retryable":true,"gate":"allowed","decision":"retried"`,
		`"msg":"attempt judged","task":"` + gated + `","attempt":1,"code":"network","technically_retryable":true,"gate":"side_effect","decision":"stopped"`,
		`"then":"recoverable_failed"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the debug log lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("agent log:\n%s", tail(out, 6000))
	}
}

func TestTokenMustBeOneToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.toml")
	must(t, os.WriteFile(file, []byte("control-plane = \"x\"\nmodels = []\n"), 0o600))
	r := runAgent(t, "run", "--control-plane", "http://127.0.0.1:1", "--token-file", file, "--data-dir", t.TempDir(), "--executor", "sample")
	wantOneLineError(t, r, 1, "token file "+file+" does not hold one token")
	r = runAgentEnv(t, []string{"AGENT_TOKEN=two words"}, "submit", "--control-plane", "http://127.0.0.1:1", "--prompt", "x")
	wantOneLineError(t, r, 1, "AGENT_TOKEN does not hold one token")
}

// Whatever the machine's time zone, what is stored and logged as JSON is
// in UTC; what is printed for people is local.
func TestStoredTimesAreUTC(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	r := runAgentEnv(t, []string{"TZ=Asia/Tokyo"}, "demo", "--data-dir", dir)
	if r.code != 0 {
		t.Fatalf("demo: %+v", r)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "agent", "tasks", "*.json"))
	files = append(files, filepath.Join(dir, "demo.log"), filepath.Join(dir, "agent", "health.json"))
	stamp := regexp.MustCompile(`"(?:time|[a-z_]*_at|since|at)": ?"(\d{4}-\d\d-\d\dT[^"]+)"`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range stamp.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !strings.HasSuffix(m[1], "Z") {
				t.Errorf("%s: %s is not in UTC", filepath.Base(f), m[0])
				break
			}
		}
	}
	if seen < 10 {
		t.Fatalf("only %d times found in %v", seen, files)
	}
	show := runAgentEnv(t, []string{"TZ=Asia/Tokyo"}, "tasks", "ls", "--json", "--data-dir", filepath.Join(dir, "agent"))
	if show.code != 0 || !strings.Contains(show.stdout, "Z\"") || strings.Contains(show.stdout, "+09:00") {
		t.Errorf("tasks ls --json is not in UTC: %s", tail(show.stdout, 500))
	}
}
