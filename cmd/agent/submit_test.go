package main

import (
	"os"
	"path/filepath"
	"testing"
)

// --prompt @FILE of a file that is not there is a usage error, before the
// control plane is asked (internal/submission tests the reading itself).
func TestSubmitPromptOfAMissingFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "prompt.md")
	must(t, os.WriteFile(file, []byte("Fix the flaky test\n"), 0o600))
	r := runAgent(t, "submit", "--control-plane", "http://127.0.0.1:1", "--token-file", file, "--prompt", "@"+file+".nope")
	wantOneLineError(t, r, 2, "--prompt @"+file+".nope: no such file or directory")
}
