package acp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/runnertest"
)

// An agent that breaks the protocol (a line on stdout that is not a
// message) or ends before it answers fails the attempt with a protocol
// error, which the runner takes as transient; the agent is stopped, and
// nothing of it is left.
func TestAnAgentThatBreaksTheProtocol(t *testing.T) {
	for _, c := range []struct {
		name, script, want string
	}{
		{"a line that is not a message", `read -r l; echo "Welcome to my agent!"; sleep 300`, "wrote a line that is not a protocol message"},
		{"an exit before the answer", `read -r l; exit 3`, "ended (exit status 3) before the turn ended"},
	} {
		t.Run(c.name, func(t *testing.T) {
			exe, err := acp.New(acp.Config{Base: cli.Base{Bin: "/bin/sh", Args: []string{"-c", c.script}, Grace: time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			a := runnertest.RunAttempt(context.Background(), t, exe, runner.AttemptSpec{AttemptID: "a-1", WorkDir: t.TempDir(),
				Task: runner.TaskInput{ID: "t-1", Prompt: "x", Attempt: 1, AttemptID: "a-1"}}, nil)
			if a.Exit.ProtocolErr == nil || !strings.Contains(a.Exit.ProtocolErr.Error(), c.want) || a.Exit.Turn != runner.TurnFailed {
				t.Errorf("exit %+v, want a protocol error saying %q", a.Exit, c.want)
			}
		})
	}
}

// --executor acp without a command says what it needs.
func TestAnACPExecutorNeedsItsCommand(t *testing.T) {
	_, err := acp.New(acp.Config{})
	if err == nil || !strings.Contains(err.Error(), "give --executor-bin the agent's command") {
		t.Errorf("err %v", err)
	}
}
