package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/internal/tmuxview"
)

// tmuxView is the tmux view the settings of agent run ask for, nil when
// --tmux is off. Its windows run this binary's own commands on the data
// directory: tasks watch in the home window, tasks logs -f --attempt N in
// an attempt's.
func (f *runFlags) tmuxView() (*tmuxview.Options, error) {
	if !f.tmux {
		return nil, nil
	}
	switch {
	case f.tmuxSocket == "" || strings.ContainsAny(f.tmuxSocket, "/\x00"):
		return nil, usagef("--tmux-socket %q: want a name, without /", f.tmuxSocket)
	case f.tmuxSession == "" || strings.ContainsAny(f.tmuxSession, ":.\x00") || strings.ContainsFunc(f.tmuxSession, isControl):
		return nil, usagef("--tmux-session %q: want a name, without : or .", f.tmuxSession)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--tmux: the agent's own binary: %w", err)
	}
	// The windows run in the tmux server's directory, not the agent's.
	dataDir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return nil, fmt.Errorf("--tmux: data directory: %w", err)
	}
	linger := f.tmuxLinger
	if linger == 0 {
		linger = -1 // none, rather than the view's default
	}
	return &tmuxview.Options{Socket: f.tmuxSocket, Session: f.tmuxSession, Owner: dataDir, Linger: linger,
		Home: []string{exe, "tasks", "watch", "--data-dir", dataDir},
		Attempt: func(taskID string, attempt int) []string {
			return []string{exe, "tasks", "logs", "-f", "--attempt", strconv.Itoa(attempt), "--data-dir", dataDir, "--", taskID}
		}}, nil
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }
