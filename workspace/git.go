package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// safeConfig is given to every git the manager runs: no hook, no file
// system monitor, no recursion into submodules (whose .git a task
// controls), no external diff or text conversion, no pager.
var safeConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "submodule.recurse=false",
	"-c", "diff.external=",
	"-c", "core.pager=cat",
}

// untrustedObjects is given to a git that reads objects a task wrote
// (through an alternate): the caches beside them, which a task could
// forge, are not read.
var untrustedObjects = []string{
	"-c", "core.commitGraph=false",
	"-c", "core.multiPackIndex=false",
	"-c", "pack.useBitmaps=false",
}

// gitDirs says which repository a git call works on. A call on a task's
// work names every directory itself, so that git never discovers
// anything from what the task wrote: the manager's own view (see
// Workspace.view) as the git directory, the task's files as the work
// tree, an index of the manager's.
type gitDirs struct {
	// dir is where git runs when nothing else is named (New's discovery).
	dir string
	// gitDir, commonDir, workTree and indexFile become GIT_DIR,
	// GIT_COMMON_DIR, GIT_WORK_TREE and GIT_INDEX_FILE when set.
	gitDir, commonDir, workTree, indexFile string
	// objects become GIT_ALTERNATE_OBJECT_DIRECTORIES: a task's objects
	// that a call on the repository reads too. Checked first
	// (taskGit.checkObjects).
	objects []string
	// objectDir becomes GIT_OBJECT_DIRECTORY: where a call writes the
	// objects it makes (the clone's, checked first, when the agent
	// commits there).
	objectDir string
	// env are more NAME=VALUE variables (a commit's author).
	env []string
}

// gitEnv is the environment of every git call: the agent's, without any
// GIT_ variable it may have inherited, and with the locale fixed so that
// the output parses.
func gitEnv(d gitDirs) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LANGUAGE=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_PAGER=cat")
	if d.gitDir != "" {
		env = append(env, "GIT_DIR="+d.gitDir)
	}
	if d.commonDir != "" {
		env = append(env, "GIT_COMMON_DIR="+d.commonDir)
	}
	if d.workTree != "" {
		env = append(env, "GIT_WORK_TREE="+d.workTree)
	}
	if d.indexFile != "" {
		env = append(env, "GIT_INDEX_FILE="+d.indexFile)
	}
	if len(d.objects) > 0 {
		env = append(env, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+strings.Join(d.objects, string(os.PathListSeparator)))
	}
	if d.objectDir != "" {
		env = append(env, "GIT_OBJECT_DIRECTORY="+d.objectDir)
	}
	return append(env, d.env...)
}

// runGit runs git with args on d, bounded by ctx, and returns its
// standard output. A failure is one line: the command and what git said.
func runGit(ctx context.Context, d gitDirs, args ...string) (string, error) {
	return runGitIn(ctx, d, "", args...)
}

// runGitIn is runGit with stdin given to git.
func runGitIn(ctx context.Context, d gitDirs, stdin string, args ...string) (string, error) {
	argv := append([]string{}, safeConfig...)
	if len(d.objects) > 0 || d.objectDir != "" {
		argv = append(argv, untrustedObjects...)
	}
	cmd := exec.CommandContext(ctx, "git", append(argv, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	cmd.Dir = d.dir
	if cmd.Dir == "" {
		cmd.Dir = d.workTree
	}
	if cmd.Dir == "" {
		cmd.Dir = d.gitDir
	}
	cmd.Env = gitEnv(d)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("git %s: %w", args[0], ctx.Err())
		}
		msg := oneLine(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %v", args[0], err)
		}
		return out.String(), &gitError{args: args, msg: msg}
	}
	return out.String(), nil
}

// gitError is git's own failure, said in one line.
type gitError struct {
	args []string
	msg  string
}

func (e *gitError) Error() string { return "git " + e.args[0] + ": " + e.msg }

// oneLine joins the non-empty lines of s with "; ".
func oneLine(s string) string {
	var parts []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
