package main

import (
	"strings"
	"testing"
)

// Every command that asks the control plane says, when it is down, which
// command failed and that the control plane is unreachable, in one line:
// not Go's `Post "…": dial tcp …`, and never the token.
func TestCommandsSayTheControlPlaneIsUnreachable(t *testing.T) {
	t.Parallel()
	url := "http://" + freeAddr(t) // nobody listens there
	tok := tokenFile(t)
	for _, tc := range []struct {
		what string
		args []string
	}{
		{"submit", []string{"submit", "--prompt", "Fix the flaky login test"}},
		{"tasks ls", []string{"tasks", "ls", "--remote"}},
		{"tasks show t-1", []string{"tasks", "show", "t-1", "--remote"}},
		{"retry t-1", []string{"tasks", "retry", "t-1"}},
		{"continue t-1", []string{"tasks", "continue", "t-1"}},
		{"cancel t-1", []string{"tasks", "cancel", "t-1"}},
		{"reply to t-1", []string{"tasks", "reply", "t-1", "--accept"}},
		{"list agents", []string{"agents", "ls"}},
		{"revoke vm-1", []string{"agents", "revoke", "vm-1"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			r := runAgent(t, append(tc.args, "--control-plane", url, "--token-file", tok)...)
			wantOneLineError(t, r, 1, "agent: "+tc.what+": the control plane at "+url+" is unreachable: connection refused\n")
			if strings.Contains(r.stderr, "dial tcp") || strings.Contains(r.stderr, `"`) {
				t.Errorf("stderr repeats Go's request error: %q", r.stderr)
			}
			if strings.Contains(r.stderr, "secret-token-value") {
				t.Errorf("stderr holds the token: %q", r.stderr)
			}
		})
	}
}
