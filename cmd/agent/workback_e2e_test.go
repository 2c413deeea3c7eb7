package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgeagent/agent/internal/browsertest"
	"github.com/edgeagent/agent/internal/forge"
	"github.com/edgeagent/agent/internal/forge/forgetest"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// Issue 43's work coming back, through the whole system on a real
// repository: a real agent and control plane, a bare repository for the
// remote, a local forge that checks requests as GitHub does.
//
// A task changes a file and leaves it uncommitted: its branch holds the
// agent's commit of the change, brought back to the repository; tasks
// diff prints it from the workspace and from the control plane alike;
// the bare remote has the branch; the forge got one well-formed request
// for it, whose address shows on the task. A push the remote refuses is
// said on the task, which stays completed, and tasks push, once the
// remote takes it, pushes and opens the request, and the control plane
// learns it. A person's retry after work left uncommitted keeps it on a
// named ref. The console's diff page shows the change on a phone.
func TestE2ETheWorkComesBack(t *testing.T) {
	t.Parallel()
	const token = "ghp_e2e0123456789abcdefghij"
	repo := gittest.NewRepo(t)
	remote := filepath.Join(gittest.OutOfReach(t), "remote.git")
	gittest.Git(t, t.TempDir(), "init", "-q", "--bare", remote)
	gittest.Git(t, repo, "remote", "add", "origin", remote)
	gittest.Git(t, repo, "push", "-q", "origin", "main")
	// The remote refuses a branch while this file is there.
	refuse := filepath.Join(t.TempDir(), "refuse")
	hook := filepath.Join(remote, "hooks", "pre-receive")
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\nif test -e "+refuse+"; then echo 'not today' >&2; exit 1; fi\n"), 0o755))
	fake := forgetest.Start(t, forge.GitHub, "octo/app", token)
	fake.HasBranch = func(name string) bool {
		return exec.Command("git", "--git-dir", remote, "rev-parse", "--verify", "-q", "refs/heads/"+name).Run() == nil
	}
	addr := freeAddr(t)
	c := startCP(t, addr, t.TempDir(), "--public-url", "http://"+addr)
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	must(t, os.WriteFile(cfg, []byte("[[repo]]\nname = \"site\"\npath = "+tomlString(repo)+"\npush = \"origin\"\npull_request = \"github\"\napi_url = "+
		tomlString(fake.API())+"\nproject = \"octo/app\"\n"), 0o600))
	dataDir := t.TempDir()
	startProc(t, "agent", []string{"GITHUB_TOKEN=" + token}, "run", "--config", cfg, "--control-plane", c.url(), "--token-file", c.tokenFile,
		"--data-dir", dataDir, "--executor", "sample", "--heartbeat-interval", "300ms", "--models", "model-a,model-b", "--shutdown-grace", "2s")
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	testkit.WaitFor(t, "the agent to announce its repository", func() bool {
		r := runAgent(t, append([]string{"submit", "--prompt", "probe", "--repo", "nowhere"}, cpArgs...)...)
		return r.code != 0 && strings.Contains(r.stderr, `(served: site)`)
	})
	submitTo := func(args ...string) string {
		t.Helper()
		r := runAgent(t, append(append([]string{"submit", "--repo", "site"}, args...), cpArgs...)...)
		if r.code != 0 {
			t.Fatalf("submit: %+v", r)
		}
		return strings.TrimSpace(r.stdout)
	}

	id := submitTo("--title", "Fix the footer", "--prompt", "Fix the footer.\n@sh printf 'new footer\\n' > footer.txt\n@output done")
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted {
		t.Fatalf("the task: %s (%s)", v.Phase, v.PhaseReason)
	}
	head := gittest.Git(t, repo, "rev-parse", "agent/"+id)
	if got := gittest.Git(t, repo, "show", "agent/"+id+":footer.txt"); got != "new footer" {
		t.Errorf("the branch holds footer.txt = %q", got)
	}
	if got := gittest.Git(t, repo, "log", "-1", "--format=%an|%s|%(trailers:key=Agent-Task,valueonly,separator=)", "agent/"+id); got != "agent|Fix the footer|"+id {
		t.Errorf("the branch's commit: %q, want the agent's, with the task's title and id", got)
	}
	ch := v.Result.Changes
	if ch == nil || ch.Head != head || len(ch.Commits) != 1 || ch.Commits[0].Subject != "Fix the footer" || ch.Uncommitted ||
		ch.PushError != "" || ch.Pushed == nil || ch.Pushed.Commit != head || ch.Pushed.Remote != "origin" || ch.PullRequest != fake.Address() {
		t.Fatalf("the task's changes: %+v (pushed %+v)", ch, ch.Pushed)
	}
	if got := gittest.Git(t, remote, "rev-parse", "agent/"+id); got != head {
		t.Errorf("the remote's agent/%s at %s, want %s", id, got, head)
	}
	made := fake.Made()
	if len(made) != 1 {
		t.Fatalf("the forge got %d requests, want 1: %v", len(made), made)
	}
	body, _ := made[0]["body"].(string)
	if made[0]["title"] != "Fix the footer" || made[0]["head"] != "agent/"+id || made[0]["base"] != "main" ||
		!strings.HasPrefix(body, "done: Fix the footer.\n\n[Task "+id+"](http://"+addr+"/tasks/"+id+"), branch `agent/"+id+"` from main.") ||
		!strings.Contains(body, " footer.txt | 1 +\n") {
		t.Errorf("the request the forge got: %v", made[0])
	}
	show := runAgent(t, append([]string{"tasks", "show", id, "--remote"}, cpArgs...)...)
	if !strings.Contains(show.stdout, "push:     pushed agent/"+id+" to origin ("+head[:7]+")") || !strings.Contains(show.stdout, "request:  "+fake.Address()) {
		t.Errorf("tasks show --remote does not say where the work went:\n%s", show.stdout)
	}

	local := runAgent(t, "tasks", "diff", id, "--data-dir", dataDir)
	fromCP := runAgent(t, append([]string{"tasks", "diff", id, "--remote"}, cpArgs...)...)
	if local.code != 0 || !strings.Contains(local.stdout, "diff --git a/footer.txt b/footer.txt\nnew file mode 100644\n") || !strings.Contains(local.stdout, "\n+new footer\n") {
		t.Errorf("tasks diff: %+v", local)
	}
	if fromCP.code != 0 || fromCP.stdout != local.stdout {
		t.Errorf("tasks diff --remote:\n%s\nwant what tasks diff printed:\n%s", fromCP.stdout, local.stdout)
	}
	if r := runAgent(t, append([]string{"tasks", "diff", id, "--remote", "--stat"}, cpArgs...)...); r.stdout != " footer.txt | +1 -0\n 1 file changed, +1 -0\n" {
		t.Errorf("tasks diff --stat: %q", r.stdout)
	}

	t.Run("a push the remote refuses, tried again", func(t *testing.T) {
		must(t, os.WriteFile(refuse, nil, 0o600))
		id := submitTo("--title", "Fix the header", "--prompt", "Fix the header.\n@sh printf 'new header\\n' > header.txt\n@output done")
		v := c.waitDone(t, id)
		if ch := v.Result.Changes; v.Phase != state.PhaseCompleted || ch == nil || ch.Pushed != nil || ch.PullRequest != "" ||
			!strings.Contains(ch.PushError, "pre-receive hook declined") {
			t.Fatalf("a push refused: %s, %+v", v.Phase, ch)
		}
		show := runAgent(t, append([]string{"tasks", "show", id, "--remote"}, cpArgs...)...)
		if !strings.Contains(show.stdout, "push:     not pushed: push: remote origin refused agent/"+id) || !strings.Contains(show.stdout, "agent tasks push "+id) {
			t.Errorf("tasks show --remote of a push refused:\n%s", show.stdout)
		}
		waitLocalPhase(t, dataDir, id, state.PhaseCompleted)
		// Without the forge's token: pushed, the request not opened.
		must(t, os.Remove(refuse))
		push := []string{"tasks", "push", id, "--config", cfg, "--data-dir", dataDir, "--control-plane", c.url(), "--token-file", c.tokenFile}
		r := runAgentEnv(t, []string{"GITHUB_TOKEN="}, push...)
		if r.code != 1 || !strings.Contains(r.stderr, "GITHUB_TOKEN is not set in the agent's environment") {
			t.Errorf("tasks push without the token: %+v", r)
		}
		r = runAgentEnv(t, []string{"GITHUB_TOKEN=" + token}, push...)
		head := gittest.Git(t, repo, "rev-parse", "agent/"+id)
		if r.code != 0 || r.stdout != id+": pushed agent/"+id+" to origin ("+head[:7]+")\n"+id+": pull request "+fake.Address()+"\n" {
			t.Fatalf("tasks push: %+v", r)
		}
		if got := gittest.Git(t, remote, "rev-parse", "agent/"+id); got != head {
			t.Errorf("the remote's agent/%s at %s, want %s", id, got, head)
		}
		v = c.task(t, id)
		if ch := v.Result.Changes; v.Phase != state.PhaseCompleted || ch.PushError != "" || ch.Pushed == nil || ch.Pushed.Commit != head || ch.PullRequest != fake.Address() {
			t.Errorf("the control plane after tasks push: %s, %+v", v.Phase, ch)
		}
		if n := len(fake.Made()); n != 2 {
			t.Errorf("the forge got %d requests in all, want 2", n)
		}
	})

	t.Run("a retry after uncommitted work keeps it on a named ref", func(t *testing.T) {
		id := submitTo("--no-commit", "--prompt", "Draft the notes.\n@sh echo draft > draft.txt\n@no-session\n@fail network\n@output done")
		if v := c.waitDone(t, id); v.Phase != state.PhaseRecoverableFailed || v.Result.Changes == nil || !v.Result.Changes.Uncommitted {
			t.Fatalf("the task: %s (%s), %+v", v.Phase, v.PhaseReason, v.Result)
		}
		waitLocalPhase(t, dataDir, id, state.PhaseRecoverableFailed)
		if r := runAgent(t, append([]string{"tasks", "retry", id}, cpArgs...)...); r.code != 0 {
			t.Fatalf("tasks retry: %+v", r)
		}
		v := c.waitPhase(t, id, "completed", func(p state.Phase) bool { return p == state.PhaseCompleted })
		kept := "refs/agent/kept/" + id + "/attempt-1"
		if len(v.Attempts) != 2 || v.Attempts[1].KeptRef != kept {
			t.Fatalf("attempts: %+v", v.Attempts)
		}
		if got := gittest.Git(t, repo, "show", kept+":draft.txt"); got != "draft" {
			t.Errorf("%s holds draft.txt = %q", kept, got)
		}
		waitLocalPhase(t, dataDir, id, state.PhaseCompleted)
		for _, args := range [][]string{{"tasks", "show", id, "--data-dir", dataDir}, append([]string{"tasks", "show", id, "--remote"}, cpArgs...)} {
			if r := runAgent(t, args...); !strings.Contains(r.stdout, "attempt 1's work kept on "+kept) {
				t.Errorf("agent %s does not name the kept ref:\n%s", strings.Join(args[:3], " "), r.stdout)
			}
		}
	})

	t.Run("the console's diff page on a phone", func(t *testing.T) {
		b := browsertest.New(t)
		con := &console{t: t, b: b, base: c.url()}
		con.open("/signin?next=/tasks/" + id)
		con.signIn("the task's page", tokenOf(t, c.operatorFile), `!!document.getElementById("diff-link")`)
		b.SetViewport(t, browsertest.Phone)
		if got := con.eval(`document.querySelector("#pull-request a").getAttribute("href")`); got != fake.Address() {
			t.Errorf("the task's page links to the pull request %q", got)
		}
		con.post("open the diff", chromedp.Tap(chromedp.CSS(`#diff-link a`)), "the diff page", `location.pathname.endsWith("/diff") && !!document.querySelector("details.diff-file")`)
		if got := con.text("details.diff-file .path"); got != "footer.txt" {
			t.Errorf("the diff page's file is %q", got)
		}
		if got := con.text("pre.patch span.add"); got != "+new footer" {
			t.Errorf("the diff page's added line is %q", got)
		}
		if got := con.eval(`getComputedStyle(document.querySelector("pre.patch span.add")).backgroundColor !== getComputedStyle(document.querySelector("pre.patch")).backgroundColor`); got != "true" {
			t.Error("the added line is not coloured")
		}
		if w := con.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
			t.Errorf("the diff page scrolls sideways on a phone by %s px", w)
		}
		b.Screenshot(t, "diff", browsertest.Phone)
	})
}
