package taskview

import (
	"bytes"
	"strings"
	"testing"

	"github.com/edgeagent/agent/state"
)

// A patch on a terminal: a file's head yellow, a hunk's cyan, added lines
// green, deleted red; what a task wrote shown inert (an escape sequence
// in a line is written \x1b, never sent), its tabs kept. Its stat reads
// the patch file by file and says a cut one's total is the diff's.
func TestTasksDiffPrintsAPatchSafely(t *testing.T) {
	t.Parallel()
	patch := "diff --git a/main.go b/main.go\nindex 1..2 100644\n--- a/main.go\n+++ b/main.go\n@@ -1,2 +1,2 @@\n func main() {\n-\tprintln(\"old\")\n+\tprintln(\"\x1b]0;pwned\x07new\x1b[2J\")\n" +
		"diff --git a/logo.png b/logo.png\nnew file mode 100644\nBinary files /dev/null and b/logo.png differ\n"
	var b bytes.Buffer
	Patch(&b, Palette{On: true}, patch)
	out := b.String()
	for _, want := range []string{
		ColourYellow + "diff --git a/main.go b/main.go" + ColourOff + "\n",
		ColourCyan + "@@ -1,2 +1,2 @@" + ColourOff + "\n",
		ColourRed + "-\tprintln(\"old\")" + ColourOff + "\n",
		ColourGreen + `+` + "\t" + `println("\x1b]0;pwned\anew\x1b[2J")` + ColourOff + "\n",
		ColourPlain + " func main() {" + ColourOff + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the printed patch lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "\x1b]0;") || strings.Contains(out, "\x1b[2J") || strings.Contains(out, "\x07") {
		t.Errorf("the printed patch carries the task's escape sequences:\n%q", out)
	}
	b.Reset()
	Patch(&b, Palette{}, patch)
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("off a terminal the patch is coloured:\n%q", b.String())
	}

	b.Reset()
	DiffStat(&b, Palette{}, state.DiffEvent{Patch: patch, Files: 5, Insertions: 9, Deletions: 4, Cut: true})
	if want := " main.go  | +1 -1\n logo.png | binary\n 5 files changed, +9 -4 (the files above are those of the first "; !strings.HasPrefix(b.String(), want) {
		t.Errorf("the stat:\n%s\nwant it to start:\n%s", b.String(), want)
	}
}

// tasks diff says on stderr that there is no change, or that the patch was
// cut and where the rest is; the branch a task named is shown inert.
func TestDiffNotes(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	Diff(&out, &errOut, "t-1", state.DiffEvent{BaseCommit: "3f9c2e1d0a"}, false)
	if out.Len() != 0 || errOut.String() != "agent: task t-1: no change against its base 3f9c2e1\n" {
		t.Errorf("no change: %q, %q", out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	Diff(&out, &errOut, "t-1", state.DiffEvent{Patch: "+a\n", Cut: true, Bytes: 4096, Branch: "agent/t-1\x1b[2J", Files: 1, Insertions: 1}, true)
	if !strings.Contains(out.String(), "1 file") || errOut.String() != "agent: the first 3 B of a diff of 4 KiB: the rest is on the task's branch agent/t-1\\x1b[2J\n" {
		t.Errorf("a cut diff: %q, %q", out.String(), errOut.String())
	}
}
