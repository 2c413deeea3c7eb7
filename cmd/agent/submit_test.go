package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPromptArg(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "prompt.md")
	must(t, os.WriteFile(file, []byte("Fix the flaky test\n"), 0o600))
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{"text", "Fix it", "Fix it", ""},
		{"a file", "@" + file, "Fix the flaky test\n", ""},
		{"a missing file", "@" + file + ".nope", "", "no such file or directory"},
		{"a word starting with @", "@@hang", "@hang", ""},
		{"sample directives are text", "Summarize\n@fail rate_limit", "Summarize\n@fail rate_limit", ""},
		{"a directive with arguments is text", "@output hi", "@output hi", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := promptArg(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("promptArg(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("promptArg(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
	// Through the command: a usage error, before the control plane is asked.
	r := runAgent(t, "submit", "--control-plane", "http://127.0.0.1:1", "--token-file", file, "--prompt", "@"+file+".nope")
	wantOneLineError(t, r, 2, "--prompt @"+file+".nope: no such file or directory")
}
