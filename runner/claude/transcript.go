package claude

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Where Claude Code keeps a session: the transcript
// CONFIG_DIR/projects/PROJECT/SESSION.jsonl, one JSON line per entry,
// appended as the conversation goes (the user's prompt is in it before
// the model is asked, so a session killed mid-turn keeps it). PROJECT is
// the session's working directory, symlinks resolved (system/init's cwd),
// with every character but an ASCII letter or digit made "-"; a name
// longer than projectNameMax is cut there and given a hash of the
// directory. `--resume SESSION` looks for the session in the project of
// its working directory. Seen in 2.1.330.

// projectNameMax is the longest project directory name Claude Code makes
// without a hash.
const projectNameMax = 200

// transcriptPath is where Claude Code keeps session, started in cwd, under
// configDir; "" when one of them is unknown.
func transcriptPath(configDir, cwd, session string) string {
	if configDir == "" || cwd == "" || session == "" || strings.ContainsAny(session, `/\`) {
		return ""
	}
	return filepath.Join(configDir, "projects", projectName(cwd), session+".jsonl")
}

// projectName is Claude Code's name for a working directory's project:
// JavaScript's replace(/[^a-zA-Z0-9]/g, "-") on its UTF-16 code units,
// and for a long one the first projectNameMax characters, "-" and the
// directory's hash in base 36.
func projectName(cwd string) string {
	units := utf16.Encode([]rune(cwd))
	name := make([]byte, len(units))
	for i, u := range units {
		if u < 128 && ('a' <= u && u <= 'z' || 'A' <= u && u <= 'Z' || '0' <= u && u <= '9') {
			name[i] = byte(u)
		} else {
			name[i] = '-'
		}
	}
	if len(name) <= projectNameMax {
		return string(name)
	}
	// The string hash Claude Code uses: h = h*31 + unit, in int32.
	var h int32
	for _, u := range units {
		h = h<<5 - h + int32(u)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return string(name[:projectNameMax]) + "-" + strconv.FormatInt(abs, 36)
}

// findTranscript looks for session's transcript in any project under
// configDir: where it is when the path Claude Code was expected to use
// was not the one it used.
func findTranscript(configDir, session string) string {
	if configDir == "" || session == "" || strings.ContainsAny(session, `/\*?[`) {
		return ""
	}
	matches, _ := filepath.Glob(filepath.Join(configDir, "projects", "*", session+".jsonl"))
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() {
			return m
		}
	}
	return ""
}
