package mockmodel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/testkit"
)

// These tests run the real, pinned Codex and Claude Code binaries against
// the mock: they prove that what the mock sends is what the CLIs accept,
// and that each scenario ends the way EXECUTORS.md says a user will see.

// hangGuard bounds any one CLI run: a guard against a hung test, never a
// timing the test asserts.
const hangGuard = 90 * time.Second

// run is the outcome of one CLI run.
type run struct {
	dir    string           // its working directory
	lines  []map[string]any // its stdout, one JSON object a line
	stderr string
	exit   int  // the exit code; -1 when killed
	killed bool // the run's limit ended it
}

// runCLI runs bin in a fresh directory with stdin /dev/null and exactly
// env, until it exits or limit has passed since mock was first asked
// (then its process group is killed). The limit counts from the request,
// not from the start: what a case killed at its limit shows is how long
// the CLI waits on a silent model, and a loaded machine may take seconds
// to start the CLI. A CLI that never asks is killed after hangGuard.
func runCLI(t *testing.T, mock *mockmodel.Server, limit time.Duration, bin string, env []string, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard+limit)
	defer cancel()
	timer := make(chan struct{})
	go func() {
		defer close(timer)
		if testkit.Until(hangGuard, func() bool { return len(mock.Requests()) > 0 || ctx.Err() != nil }) {
			select {
			case <-time.After(limit):
				cancel()
			case <-ctx.Done():
			}
		}
	}()
	defer func() { <-timer }()
	r := run{dir: t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = r.dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r.killed = ctx.Err() != nil
	cancel() // the timer's goroutine ends with the run
	r.exit = cmd.ProcessState.ExitCode()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s: %v", bin, err)
	}
	r.stderr = stderr.String()
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %v: %s", err, l)
		}
		r.lines = append(r.lines, m)
	}
	return r
}

// of returns the lines whose "type" is typ.
func (r run) of(typ string) []map[string]any {
	var out []map[string]any
	for _, l := range r.lines {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

// dump is the run, for a failure message.
func (r run) dump(mock *mockmodel.Server) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d killed %v\nrequests:\n", r.exit, r.killed)
	for _, q := range mock.Requests() {
		fmt.Fprintf(&b, "  %s %s %s tool=%v stream=%v\n", q.API, q.Model, q.Scenario, q.ToolResult, q.Stream)
	}
	b.WriteString("stdout:\n")
	for _, l := range r.lines {
		j, _ := json.Marshal(l)
		s := string(j)
		if len(s) > 600 {
			s = s[:600] + "…"
		}
		b.WriteString("  " + s + "\n")
	}
	return b.String() + "stderr:\n" + r.stderr
}

// checkFile asserts that the run left path (relative to its directory)
// with content.
func (r run) checkFile(t *testing.T, path, content string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, path))
	if err != nil {
		t.Errorf("the tool's file: %v", err)
	} else if string(b) != content {
		t.Errorf("%s holds %q, want %q", path, b, content)
	}
}

// step is one model request as the mock recorded it.
type step struct {
	scenario mockmodel.Scenario
	stream   bool
}

// checkRequests asserts what the CLI asked the mock, in order.
func checkRequests(t *testing.T, mock *mockmodel.Server, api mockmodel.API, model string, want []step) {
	t.Helper()
	got := mock.Requests()
	var gotSteps []step
	toolRan := false
	for _, q := range got {
		gotSteps = append(gotSteps, step{q.Scenario, q.Stream})
		if q.API != api || q.Model != model {
			t.Errorf("request %+v, want API %s model %s", q, api, model)
		}
		if q.ToolResult != toolRan {
			t.Errorf("request %+v: carries a tool result %v, want %v", q, q.ToolResult, toolRan)
		}
		switch q.Scenario {
		case mockmodel.ScenarioShell, mockmodel.ScenarioWrite, mockmodel.ScenarioEscalate:
			toolRan = true
		}
	}
	if fmt.Sprint(gotSteps) != fmt.Sprint(want) {
		t.Errorf("requests (scenario, stream) %v, want %v", gotSteps, want)
	}
}

// str digs a string out of nested JSON objects.
func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		o, _ := v.(map[string]any)
		v = o[k]
	}
	s, _ := v.(string)
	return s
}

func startMock(t *testing.T) *mockmodel.Server {
	t.Helper()
	m, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}
