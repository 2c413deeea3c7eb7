package tmuxview

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CheckNames refuses a socket name tmux would read as a path, and a
// session name it would read as a target (session:window.pane).
func CheckNames(socket, session string) error {
	switch {
	case socket == "" || strings.ContainsAny(socket, "/\x00"):
		return fmt.Errorf("--tmux-socket %q: want a name, without /", socket)
	case session == "" || strings.ContainsAny(session, ":.\x00") || strings.ContainsFunc(session, isControl):
		//lint:ignore ST1005 the words agent run has always said; the dot is a character refused
		return fmt.Errorf("--tmux-session %q: want a name, without : or .", session)
	}
	return nil
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

// ForAgent is the view of the agent whose binary is exe, over its data
// directory dataDir (absolute: the windows run in the tmux server's
// directory, not the agent's): the home window runs tasks watch, an
// attempt's tasks logs -f --attempt N. A linger of 0 is none, rather than
// DefaultLinger.
func ForAgent(exe, dataDir, socket, session string, linger time.Duration) Options {
	if linger == 0 {
		linger = -1
	}
	return Options{Socket: socket, Session: session, Owner: dataDir, Linger: linger,
		Home: []string{exe, "tasks", "watch", "--data-dir", dataDir},
		Attempt: func(taskID string, attempt int) []string {
			return []string{exe, "tasks", "logs", "-f", "--attempt", strconv.Itoa(attempt), "--data-dir", dataDir, "--", taskID}
		}}
}
