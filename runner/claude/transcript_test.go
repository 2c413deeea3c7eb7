package claude

import (
	"strings"
	"testing"
)

// The project names Claude Code 2.1.330 made for these working
// directories, as found under its config directory.
func TestProjectNameIsClaudeCodes(t *testing.T) {
	long := "/tmp/cl/" + strings.Repeat("a", 120) + "/" + strings.Repeat("b", 100)
	for _, c := range []struct{ cwd, want string }{
		{"/tmp/cl/work", "-tmp-cl-work"},
		{"/tmp/cl/W_o.rk 1", "-tmp-cl-W-o-rk-1"},
		{long, "-tmp-cl-" + strings.Repeat("a", 120) + "-" + strings.Repeat("b", 71) + "-u4mg28"},
	} {
		if got := projectName(c.cwd); got != c.want {
			t.Errorf("projectName(%q) = %q, want %q", c.cwd, got, c.want)
		}
	}
	if got := transcriptPath("/cfg", "/w", "s-1"); got != "/cfg/projects/-w/s-1.jsonl" {
		t.Errorf("transcriptPath = %q", got)
	}
	if got := transcriptPath("/cfg", "/w", "../s"); got != "" {
		t.Errorf("a session id with a slash made a path: %q", got)
	}
}
