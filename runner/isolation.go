package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/edgeagent/agent/internal/landlock"
)

// Isolation confines every attempt with Landlock, under its keeper: a task
// reads and runs what the agent's user can, except Deny; it writes only its
// work directory, a temporary directory of its own (TMPDIR), /tmp, /dev,
// what its CLI keeps of its own (Codex's CODEX_HOME, Claude Code's config
// directory) and Write. It lists any directory, and signals no process
// outside its attempt.
type Isolation struct {
	// Deny are the agent's own files: its data directory (the work
	// directories in it are each given back to their task alone), token
	// files and config file. The runner adds its work root, so that no
	// task reaches another's work directory.
	Deny []string
	// Write are more hierarchies attempts may write (a build cache, say).
	Write []string
}

// baseWritable are written by most programs, whatever they are.
var baseWritable = []string{"/tmp", "/dev"}

// TaskWritable are the hierarchies every confined task may write, beside
// its own directories: /tmp, /dev and Write. What is in them, a task
// can change (the agent refuses to serve a repository there).
func (iso *Isolation) TaskWritable() []string {
	return append(slices.Clone(baseWritable), iso.Write...)
}

// policy is one attempt's confinement, before its executor adds what its
// CLI keeps of its own (AttemptSpec.confine): dirs are the attempt's own
// (its work, temporary and session directories), given back from the
// work root.
func (iso *Isolation) policy(workRoot string, dirs ...string) *landlock.Policy {
	write := append(slices.Clone(baseWritable), iso.Write...)
	for _, d := range dirs {
		if d != "" {
			write = append(write, d)
		}
	}
	deny := slices.Clone(iso.Deny)
	if workRoot != "" {
		deny = append(deny, workRoot)
	}
	return &landlock.Policy{Read: []string{"/"}, Write: write, Deny: deny, ListAll: true}
}

// attemptTempDir makes an attempt's own temporary directory: in the work
// root, where its confinement denies every task but this one, else in the
// system's.
func attemptTempDir(workRoot, attemptID string) (string, error) {
	if workRoot == "" {
		return os.MkdirTemp("", "agent-"+attemptID+"-")
	}
	dir := filepath.Join(workRoot, ".tmp", attemptID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("temporary directory: %w", err)
	}
	return dir, nil
}

// Confinement is spec's confinement with what the CLI keeps of its own added,
// made if missing (a CLI could not make it itself in a directory it may not
// write); nil when the attempt is not confined.
func (s AttemptSpec) Confinement(cliState ...string) *landlock.Policy {
	if s.Confine == nil {
		return nil
	}
	p := *s.Confine
	p.Write = slices.Clone(p.Write)
	for _, dir := range cliState {
		if dir == "" {
			continue
		}
		_, missing := os.Stat(dir)
		_ = os.MkdirAll(dir, 0o700)
		if missing != nil && s.TaskUser != nil {
			// Made here for a task user: theirs, as the CLI would have
			// made it.
			_ = s.TaskUser.own(dir)
		}
		p.Write = append(p.Write, dir)
	}
	return &p
}
