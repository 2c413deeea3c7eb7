package workspace

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// remoteName is what the agent takes for a remote's name: git's usual
// names, nothing an option could be read from.
var remoteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`)

// CheckRemote checks that remote is the name of a remote of repository
// repoName (its config has a URL for it).
func (m *Manager) CheckRemote(ctx context.Context, repoName, remote string) error {
	_, err := m.RemoteURL(ctx, repoName, remote)
	return err
}

// RemoteURL is the URL repository repoName's config gives remote, as
// git would push to it.
func (m *Manager) RemoteURL(ctx context.Context, repoName, remote string) (string, error) {
	r, ok := m.repo(repoName)
	if !ok {
		return "", m.notServed(repoName)
	}
	if !remoteName.MatchString(remote) {
		return "", fmt.Errorf("remote %q: want a remote's name (letters, digits, '.', '_', '-', '/')", remote)
	}
	d := gitDirs{dir: r.commonDir, gitDir: r.commonDir}
	out, err := runGit(ctx, d, "remote", "get-url", "--push", remote)
	if err != nil {
		return "", fmt.Errorf("repository %q has no remote %q (git remote -v in %s lists them)", repoName, remote, r.Path)
	}
	return strings.TrimSpace(out), nil
}

// Push pushes task taskID's branch, as the agent brought it back to the
// repository, to the repository's remote (Repo.Push), and returns the
// remote and the commit pushed. It runs the person's git on their
// repository, with their config for the remote (its URL, credentials,
// ssh): never anything of the task's. It pushes the one commit the
// repository's branch names, as inspected (a symbolic ref is refused,
// never followed), to refs/heads/agent/TASK_ID alone: no tag, no hook,
// no submodule; and never over what someone else pushed there since the
// agent last did (--force-with-lease with what it pushed, or nothing).
func (m *Manager) Push(ctx context.Context, taskID string) (remote, commit string, err error) {
	w, err := m.Get(taskID)
	if err != nil {
		return "", "", err
	}
	r, ok := m.repo(w.Repo)
	switch {
	case !ok:
		return "", "", m.notServed(w.Repo)
	case r.Push == "":
		return "", "", fmt.Errorf("repository %q pushes nowhere (push = \"REMOTE\" in its [[repo]] table)", w.Repo)
	case !remoteName.MatchString(r.Push):
		return "", "", fmt.Errorf("repository %q: push = %q: want a remote's name", w.Repo, r.Push)
	}
	defer m.lock(w.CommonDir)()
	b, err := w.repoBranch(ctx)
	switch {
	case err != nil:
		return "", "", err
	case b.symbolic != "":
		return "", "", fmt.Errorf("repository %q: its branch %s is a symbolic ref (to %s), not the agent's; not pushed", w.Repo, w.Branch, b.symbolic)
	case b.oid == "":
		return "", "", fmt.Errorf("repository %q has no branch %s to push: the task's work was not brought back", w.Repo, w.Branch)
	}
	expect := ""
	if w.PushedTo == r.Push {
		expect = w.Pushed
	}
	out, err := runGit(ctx, w.repoDirs(), "push", "--porcelain", "--no-follow-tags", "--no-verify", "--no-signed",
		"--recurse-submodules=no", "--force-with-lease="+w.ref()+":"+expect, r.Push, b.oid+":"+w.ref())
	if err != nil {
		// The porcelain line of a ref git refused says why: "!\tFROM:TO\t[rejected] (stale info)".
		for line := range strings.SplitSeq(out, "\n") {
			if f := strings.SplitN(line, "\t", 3); len(f) == 3 && f[0] == "!" {
				if strings.Contains(f[2], "stale info") {
					return "", "", fmt.Errorf("remote %s: its branch %s moved since the agent last pushed it; not overwritten", r.Push, w.Branch)
				}
				return "", "", fmt.Errorf("remote %s refused %s: %s", r.Push, w.Branch, redactURLs(oneLine(f[2])))
			}
		}
		return "", "", fmt.Errorf("remote %s: %s", r.Push, redactURLs(err.Error()))
	}
	w.Pushed, w.PushedTo = b.oid, r.Push
	if err := m.save(w); err != nil {
		return "", "", err
	}
	return r.Push, b.oid, nil
}

// PullBase is the branch a pull request of task taskID's branch asks to
// merge into: the task's base when it is a branch of the repository,
// else the push remote's default branch (refs/remotes/REMOTE/HEAD).
func (m *Manager) PullBase(ctx context.Context, taskID string) (string, error) {
	w, err := m.Get(taskID)
	if err != nil {
		return "", err
	}
	if w.Base != "HEAD" {
		if _, err := runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", "--end-of-options", "refs/heads/"+w.Base); err == nil {
			return w.Base, nil
		}
	}
	if r, ok := m.repo(w.Repo); ok && r.Push != "" {
		if out, err := runGit(ctx, w.repoDirs(), "symbolic-ref", "-q", "--short", "refs/remotes/"+r.Push+"/HEAD"); err == nil {
			if b, ok := strings.CutPrefix(strings.TrimSpace(out), r.Push+"/"); ok && b != "" {
				return b, nil
			}
		}
	}
	return "", fmt.Errorf("the task's base %q is not a branch, and the remote's default branch is not known (git remote set-head --auto); a pull request needs a branch to merge into", w.Base)
}

// urlUser finds the user (and password) of a URL in what git says.
var urlUser = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// redactURLs drops the user and password of every URL in s: git names
// the remote's URL in its errors, credentials and all.
func redactURLs(s string) string { return urlUser.ReplaceAllString(s, "${1}…@") }
