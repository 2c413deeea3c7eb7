package opencode_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/keeper"
)

func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	goleak.VerifyTestMain(m)
}
