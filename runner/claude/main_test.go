package claude_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/runner/runnertest"
)

func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	runnertest.ServeClaudeApprovals()
	goleak.VerifyTestMain(m)
}
