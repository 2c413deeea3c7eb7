package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/state"
)

// A task made while the person's checkout holds changes no commit holds
// says so: how many files changed (staged or not) and how many are
// untracked (ignored ones are not), and the commit the task starts from,
// whose files are the clone's; the changes stay in the checkout, as
// they were. A clean checkout says nothing, and a task made again (an
// agent restarting) says what it said when it was made.
func TestPrepareSaysTheCheckoutHoldsChanges(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	if w := b.prepare("clean", ""); w.Checkout != nil {
		t.Errorf("a clean checkout: %+v", w.Checkout)
	}
	head := git(t, b.repo, "rev-parse", "HEAD")
	write(t, b.repo, "README", "changed, not staged\n", "staged.txt", "staged\n", "notes/new.txt", "untracked\n", "build.log", "ignored\n")
	git(t, b.repo, "add", "staged.txt")
	statusBefore := git(t, b.repo, "status", "--porcelain")

	w := b.prepare("dirty", "")
	want := &state.Checkout{Repo: "app", Base: "main", BaseCommit: head, Changed: 2, Untracked: 1}
	if w.Checkout == nil || *w.Checkout != *want {
		t.Fatalf("a dirty checkout: %+v, want %+v", w.Checkout, want)
	}
	if got, want := state.CheckoutText(w.Checkout), "the checkout of app has uncommitted changes (2 files changed, 1 untracked); this task starts from main at "+head[:7]+" and does not see them"; got != want {
		t.Errorf("CheckoutText: %q, want %q", got, want)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Dir, "README")); string(got) != "one\ntwo\nthree\n" {
		t.Errorf("the clone's README is %q, want the commit's", got)
	}
	for _, f := range []string{"staged.txt", "notes", "build.log"} {
		if _, err := os.Stat(filepath.Join(w.Dir, f)); err == nil {
			t.Errorf("the clone holds the checkout's %s", f)
		}
	}
	if got := git(t, b.repo, "status", "--porcelain"); got != statusBefore {
		t.Errorf("the checkout's status moved: %q, was %q", got, statusBefore)
	}
	if again := b.prepare("dirty", ""); again.Checkout == nil || *again.Checkout != *want {
		t.Errorf("prepared again: %+v, want %+v", again.Checkout, want)
	}

	// Untracked files alone are uncommitted changes too.
	git(t, b.repo, "reset", "-q", "--hard")
	if w := b.prepare("untracked", ""); w.Checkout == nil || w.Checkout.Changed != 0 || w.Checkout.Untracked != 1 ||
		!strings.Contains(state.CheckoutText(w.Checkout), "(1 file untracked)") {
		t.Errorf("untracked files alone: %+v: %s", w.Checkout, state.CheckoutText(w.Checkout))
	}
}

// Reading the checkout's status runs nothing git's config in the
// repository would have it run (a file system monitor), and a bare
// repository, which has no checkout, says nothing.
func TestCheckoutStatusRunsNothing(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ran := filepath.Join(t.TempDir(), "ran")
	monitor := filepath.Join(t.TempDir(), "monitor")
	if err := os.WriteFile(monitor, []byte("#!/bin/sh\necho ran >> "+ran+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	git(t, b.repo, "config", "core.fsmonitor", monitor)
	write(t, b.repo, "README", "changed\n")
	if w := b.prepare("monitored", ""); w.Checkout == nil || w.Checkout.Changed != 1 {
		t.Errorf("a monitored checkout: %+v", w.Checkout)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("reading the checkout's status ran its core.fsmonitor")
	}

	bare := filepath.Join(t.TempDir(), "bare.git")
	git(t, t.TempDir(), "clone", "-q", "--bare", b.repo, bare)
	m, err := New(filepath.Join(t.TempDir(), "work"), []Repo{{Name: "bare", Path: bare}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Prepare(t.Context(), "from-bare", "bare", "")
	if err != nil {
		t.Fatal(err)
	}
	if w.Checkout != nil {
		t.Errorf("a bare repository: %+v", w.Checkout)
	}
}
