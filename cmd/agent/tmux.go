package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgeagent/agent/internal/tmuxview"
)

// tmuxView is the tmux view the settings of agent run ask for, nil when
// --tmux is off: its windows run this binary's own commands on the data
// directory (tmuxview.ForAgent).
func (f *runFlags) tmuxView() (*tmuxview.Options, error) {
	if !f.tmux {
		return nil, nil
	}
	if err := tmuxview.CheckNames(f.tmuxSocket, f.tmuxSession); err != nil {
		return nil, usageError{err}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--tmux: the agent's own binary: %w", err)
	}
	dataDir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return nil, fmt.Errorf("--tmux: data directory: %w", err)
	}
	o := tmuxview.ForAgent(exe, dataDir, f.tmuxSocket, f.tmuxSession, f.tmuxLinger)
	return &o, nil
}
