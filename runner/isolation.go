package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgeagent/agent/internal/landlock"
)

// Isolation confines every attempt with Landlock, under its keeper: a task
// reads and runs what the agent's user can, except Deny and Credentials
// (Allow excepted); it writes only its work directory, a temporary
// directory of its own (TMPDIR), /tmp, /dev, what its CLI keeps of its own
// (Codex's CODEX_HOME, Claude Code's config directory) and Write. It lists
// any directory, and signals no process outside its attempt.
type Isolation struct {
	// Deny are the agent's own files: its data directory (the work
	// directories in it are each given back to their task alone), token
	// files and config file, a control plane's state directory, and what
	// the operator adds. The runner adds its work root, so that no task
	// reaches another's work directory.
	Deny []string
	// Credentials are the person's credentials, denied too, except where
	// the attempt's own CLI keeps its state: Codex's login is in
	// CODEX_HOME, which a Codex attempt must read, and a Claude attempt
	// must not.
	Credentials []string
	// Allow are files or hierarchies inside Credentials that attempts may
	// read all the same (a deploy key a task is meant to use).
	Allow []string
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

// confine sets spec's confinement, before its executor adds what its CLI
// keeps of its own (AttemptSpec.Confinement): dirs are the attempt's own
// (its work, temporary and session directories), given back from the work
// root; its serve directory is given back to read only.
func (iso *Isolation) confine(spec *AttemptSpec, workRoot string, dirs ...string) {
	spec.Confine, spec.credentials = iso.policy(workRoot, dirs...), iso.Credentials
	if spec.ServeDir != "" {
		spec.Confine.Read = append(spec.Confine.Read, spec.ServeDir)
	}
}

// policy is one attempt's confinement, its credentials left out: those
// are added where the executor's CLI state is known (Confinement).
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
	read := append([]string{"/"}, iso.Allow...)
	return &landlock.Policy{Read: read, Write: write, Deny: deny, ListAll: true}
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

// ServeDirName is the directory of the work root that holds each confined
// attempt's serve directory (AttemptSpec.ServeDir).
const ServeDirName = ".serve"

// attemptServeDir makes an attempt's serve directory, in the work root,
// which every task's confinement denies: the attempt's is given back to it
// to read only (see confine). A task user may enter it, not list it (0711):
// it opens what the executor gave it there by name.
func attemptServeDir(workRoot, attemptID string, u *TaskUser) (string, error) {
	dir, err := filepath.Abs(filepath.Join(workRoot, ServeDirName, attemptID))
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err == nil && u != nil {
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		return "", fmt.Errorf("serve directory: %w", err)
	}
	return dir, nil
}

// GiveToTask gives paths, made by the executor in ServeDir for the task's
// processes to open, to the task user, when the attempt runs as one.
func (s AttemptSpec) GiveToTask(paths ...string) error {
	return s.TaskUser.own(paths...)
}

// Confinement is spec's confinement with what the CLI keeps of its own added,
// made if missing (a CLI could not make it itself in a directory it may not
// write), and the person's credentials denied but those in it; nil when
// the attempt is not confined.
func (s AttemptSpec) Confinement(cliState ...string) *landlock.Policy {
	if s.Confine == nil {
		return nil
	}
	p := *s.Confine
	p.Write = slices.Clone(p.Write)
	var state []string
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
		if abs, err := filepath.Abs(dir); err == nil {
			state = append(state, abs)
		}
	}
	p.Deny = slices.Clone(p.Deny)
	for _, c := range s.credentials {
		if !inAny(c, state) {
			p.Deny = append(p.Deny, c)
		}
	}
	return &p
}

// inAny reports whether path is one of dirs or lies beneath one.
func inAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
