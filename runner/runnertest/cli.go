package runnertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/opencode"
	"github.com/edgeagent/agent/state"
)

// CLICase is one scenario through one real CLI.
type CLICase struct {
	Name   string
	Prompt string
	Models []string
	// what the task must come to
	Phase   state.Phase
	Codes   []state.ErrorCode // the attempts' error codes, "" for one that completed
	Gate    state.GateReason  // the last attempt's gate, when it failed
	Summary string            // the result's summary, when completed
	Asked   []string          // the models asked on the wire, in turn, when set
	// Continued: every attempt after the first continued the first's
	// session, and the model was asked with the first prompt in the
	// conversation and the follow-up after it.
	Continued bool
	// Confined runs the case as agent run confines attempts: Landlock,
	// and a network namespace that reaches the executor's model API
	// alone (skipped where the kernel has neither).
	Confined bool
	// SideEffect: the first attempt had a side effect (a command ran, a
	// file changed).
	SideEffect bool
	// SlowStart: the CLI takes seconds to start (SlowStart).
	SlowStart bool
}

// SlowStartFirstEvent is the first-event limit of a fixture whose CLI
// takes seconds to start before it asks the model (OpenCode, Gemini CLI:
// 2 to 5 s alone, and over 40 s seen with three at once on two busy
// cores): the limit counts from the attempt's start.
const SlowStartFirstEvent = 2 * time.Minute

// SlowStart gives the fixture's attempts a first-event limit its slow
// CLI meets on a loaded machine (SlowStartFirstEvent), and an attempt
// limit to match, for the tests that do not test the limit.
func SlowStart(f *Fixture) {
	f.Runner.Timeouts = runner.Timeouts{FirstEvent: []time.Duration{SlowStartFirstEvent}, Attempt: []time.Duration{5 * time.Minute}}
}

// Check asserts the task's end against the case.
func (c CLICase) Check(t testing.TB, f *Fixture, mock *mockmodel.Server) {
	t.Helper()
	task := f.Task
	if task.Phase != c.Phase {
		t.Fatalf("task ended %s (%s), want %s; attempts %s; logs:\n%s", task.Phase, task.PhaseReason, c.Phase, AttemptsText(task), strings.Join(f.Rec.Logs(), "\n"))
	}
	if len(task.Attempts) != len(c.Codes) {
		t.Fatalf("%d attempts (%s), want %d", len(task.Attempts), AttemptsText(task), len(c.Codes))
	}
	for i, a := range task.Attempts {
		var code state.ErrorCode
		if a.Error != nil {
			code = a.Error.Code
		}
		if code != c.Codes[i] {
			t.Errorf("attempt %d: code %q (%v), want %q", i+1, code, a.Error, c.Codes[i])
		}
		if a.SessionID == "" {
			t.Errorf("attempt %d has no session id", i+1)
		}
	}
	last := task.Attempts[len(task.Attempts)-1]
	if c.Gate != "" && (last.Retry == nil || last.Retry.Gate != c.Gate) {
		t.Errorf("last attempt's retry decision %+v, want gate %s", last.Retry, c.Gate)
	}
	if c.Continued {
		for _, a := range task.Attempts[1:] {
			if a.Continues != 1 || a.SessionID != task.Attempts[0].SessionID {
				t.Errorf("attempt %d continues %d in session %s, want attempt 1's session %s", a.Number, a.Continues, a.SessionID, task.Attempts[0].SessionID)
			}
		}
		reqs := mock.Requests()
		if last := reqs[len(reqs)-1]; !last.Said(mockmodel.RoleUser, "cut off before it finished") || !last.Said(mockmodel.RoleUser, firstLine(c.Prompt)) {
			t.Errorf("the last request does not carry the first prompt and the follow-up: %+v", last.Conversation)
		}
	}
	if c.SideEffect && !task.Attempts[0].Facts.SideEffect {
		t.Errorf("attempt 1 records no side effect: %+v", task.Attempts[0].Facts)
	}
	if c.Confined {
		for _, a := range task.Attempts {
			if a.Egress != nil && a.Egress.Denied > 0 {
				t.Errorf("attempt %d: its proxy refused %d connection(s) (%v): the executor does not allow what its CLI reaches", a.Number, a.Egress.Denied, a.Egress.Last)
			}
		}
	}
	if c.Summary != "" && (task.Result == nil || task.Result.Summary != c.Summary) {
		t.Errorf("result %+v, want summary %q", task.Result, c.Summary)
	}
	if c.Asked != nil {
		var asked []string
		for _, r := range mock.Requests() {
			asked = appendOnce(asked, r.Model)
		}
		if strings.Join(asked, ",") != strings.Join(c.Asked, ",") {
			t.Errorf("models asked on the wire %v, want %v", asked, c.Asked)
		}
	}
}

func appendOnce(list []string, s string) []string {
	if len(list) > 0 && list[len(list)-1] == s {
		return list
	}
	return append(list, s)
}

// cliLimit keeps a few real CLIs running at once on a small machine.
var cliLimit = make(chan struct{}, 3)

// LimitCLIs waits until the test may run a real CLI (a few run at once)
// and holds its place until the test ends.
func LimitCLIs(t testing.TB) {
	cliLimit <- struct{}{}
	t.Cleanup(func() { <-cliLimit })
}

// StartMock starts the mock model on loopback, closed when the test ends.
func StartMock(t testing.TB) *mockmodel.Server {
	t.Helper()
	mock, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mock.Close)
	return mock
}

// RunCLICase runs the case, in parallel with others, through the executor
// exe makes for the mock model, checks its end, and fails when a process
// of its attempts outlived them.
func RunCLICase(t *testing.T, c CLICase, exe func(*mockmodel.Server) runner.Executor) {
	t.Parallel()
	LimitCLIs(t)
	mock := StartMock(t)
	f := NewCLIFixture(t, exe(mock), c.Prompt, c.Models)
	if c.Confined {
		Confine(t, f)
	}
	if c.SlowStart {
		SlowStart(f)
	}
	f.Run(t, context.Background())
	c.Check(t, f, mock)
	AssertNoMarkedProcess(t, f.Runner.Owner)
}

// Confine makes the fixture's runner confine its attempts as agent run
// does: Landlock (its work root denied but to each task) and a network
// namespace of their own with nothing allowed but what the executor adds
// (its model API). It skips the test where the kernel allows neither.
func Confine(t testing.TB, f *Fixture) {
	t.Helper()
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	if err := keeper.ProbeEgress(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	f.Runner.Isolation = &runner.Isolation{}
	f.Runner.Egress = &runner.Egress{}
}

// AssertNoMarkedProcess fails when a process of the owner's attempts is
// still alive, and kills what it finds.
func AssertNoMarkedProcess(t testing.TB, owner string) {
	t.Helper()
	if pids := proc.OwnerProcesses(owner); len(pids) > 0 {
		for _, pid := range pids {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("process %d (%s) of the attempt outlived it", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
		proc.SweepOwner(owner)
	}
}

// CodexExec returns a Codex executor running the pinned CLI against mock,
// in full access unless cfg says another sandbox, with a 2 s grace unless
// cfg says another.
func CodexExec(t testing.TB, mock *mockmodel.Server, cfg codex.Config) *codex.Codex {
	t.Helper()
	cfg.Bin = clitest.CodexBin(t)
	cfg.Env = append(cfg.Env, clitest.CodexEnv(t, mock, clitest.CodexOptions{StreamIdleMS: 1500})...)
	if cfg.Sandbox == "" {
		cfg.Sandbox = "danger-full-access"
	}
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	exe, err := codex.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// claudeApprovalEnv makes a test binary serve Claude Code's permission
// prompt tool (ServeClaudeApprovals), as the agent's own binary does.
const claudeApprovalEnv = "RUNNERTEST_CLAUDE_APPROVAL_MCP"

// ServeClaudeApprovals, called first in TestMain, makes the test binary
// the permission prompt tool's server when ClaudeExec started it so: it
// serves, and exits.
func ServeClaudeApprovals() {
	if os.Getenv(claudeApprovalEnv) != "1" {
		return
	}
	dir := ""
	for i, a := range os.Args {
		if a == "--dir" && i+1 < len(os.Args) {
			dir = os.Args[i+1]
		}
	}
	if err := claude.ServeMCP(os.Stdin, os.Stdout, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ClaudeExec returns a Claude executor running the pinned CLI against
// mock, with a 2 s grace and a 3 s API timeout unless cfg says others.
// With an approval policy, the test binary serves the permission prompt
// tool: its TestMain calls ServeClaudeApprovals.
func ClaudeExec(t testing.TB, mock *mockmodel.Server, cfg claude.Config) *claude.Claude {
	t.Helper()
	if cfg.Approval != "" && cfg.Approval != runner.ApprovalNever && cfg.PromptTool == nil {
		cfg.PromptTool, cfg.PromptEnv = []string{os.Args[0]}, []string{claudeApprovalEnv + "=1"}
	}
	cfg.Bin = clitest.ClaudeBin(t)
	cfg.Env = append(cfg.Env, clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})...)
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.APITimeout == 0 {
		cfg.APITimeout = 3 * time.Second
	}
	exe, err := claude.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// OpenCodeExec returns an OpenCode executor running the pinned CLI
// against mock (clitest.OpenCodeEnv), with a 2 s grace unless cfg says
// another.
func OpenCodeExec(t testing.TB, mock *mockmodel.Server, cfg opencode.Config) *opencode.OpenCode {
	t.Helper()
	cfg.Bin = clitest.OpenCodeBin(t)
	cfg.Env = append(cfg.Env, clitest.OpenCodeEnv(t, mock)...)
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	exe, err := opencode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// CodexACPExec returns the acp executor running the pinned codex-acp
// against mock (clitest.CodexEnv: Codex's configuration, which codex-acp
// reads), with a 2 s grace unless cfg says another.
func CodexACPExec(t testing.TB, mock *mockmodel.Server, cfg acp.Config) *acp.Executor {
	t.Helper()
	cfg.Bin = clitest.CodexACPBin(t)
	cfg.Env = append(cfg.Env, clitest.CodexEnv(t, mock, clitest.CodexOptions{StreamIdleMS: 1500})...)
	cfg.EnvPass = append(cfg.EnvPass, "MOCK_API_KEY")
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	exe, err := acp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// GeminiExec returns the acp executor running the pinned Gemini CLI in
// ACP mode against mock (clitest.GeminiEnv), with a 2 s grace unless cfg
// says another.
func GeminiExec(t testing.TB, mock *mockmodel.Server, cfg acp.Config) *acp.Executor {
	t.Helper()
	cfg.Bin = clitest.GeminiBin(t)
	cfg.Env = append(cfg.Env, clitest.GeminiEnv(t, mock)...)
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	exe, err := acp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// ClaudeCodeACPExec returns the acp executor running the pinned
// claude-code-acp against mock (clitest.ClaudeEnv), with the pinned
// Claude Code as the Claude Code it runs (CLAUDE_CODE_EXECUTABLE) and a
// 2 s grace unless cfg says another. cfg.Env's variables win over these.
func ClaudeCodeACPExec(t testing.TB, mock *mockmodel.Server, cfg acp.Config) *acp.Executor {
	t.Helper()
	cfg.Bin = clitest.ClaudeCodeACPBin(t)
	env := append(clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{}), "CLAUDE_CODE_EXECUTABLE="+clitest.ClaudeBin(t))
	cfg.Env = append(env, cfg.Env...)
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	exe, err := acp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
