package acp_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/keeper"
)

func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	// Gemini CLI skips a settings file under a directory others may
	// write (/tmp): the attempts' directories are elsewhere.
	restore, err := clitest.PrivateTempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 0
	func() {
		defer restore()
		defer func() {
			if err := goleak.Find(); err != nil && code == 0 {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}()
		code = m.Run()
	}()
	os.Exit(code)
}
