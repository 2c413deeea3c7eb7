package filestore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openReg(t *testing.T, dir string) *registry {
	t.Helper()
	r, err := openRegistry(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// crashReg drops a registry as a killed process would: no compaction.
func crashReg(r *registry) { r.file.Close() }

func wantAgent(t *testing.T, r *registry, hash, want string) {
	t.Helper()
	if got := r.agent(hash); got != want {
		t.Errorf("agent(%s) = %q, want %q", hash, got, want)
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// Registers and revokes are in the log, synced, and outlive a process
// killed without a word, and a clean close; each adds one line to the
// log, whatever the number of agents.
func TestRegistrySurvivesAReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := openReg(t, dir)
	must(t, r.register("a", "h-a", false))
	must(t, r.register("b", "h-b", false))
	must(t, r.register("b", "h-b2", true))
	if err := r.register("b", "h-b3", false); !errors.Is(err, store.ErrRegistered) {
		t.Errorf("register of a registered id: %v", err)
	}
	must(t, r.register("c", "h-c", false))
	if ok, err := r.revoke("c"); !ok || err != nil {
		t.Fatalf("revoke(c) = %v, %v", ok, err)
	}
	if n := lines(t, filepath.Join(dir, "agents.log")); n != 5 {
		t.Errorf("the log holds %d lines after 5 changes", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "agents.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("agents.json is written on register: %v", err)
	}
	check := func(r *registry) {
		t.Helper()
		wantAgent(t, r, "h-a", "a")
		wantAgent(t, r, "h-b", "")
		wantAgent(t, r, "h-b2", "b")
		wantAgent(t, r, "h-c", "")
	}
	crashReg(r)
	r = openReg(t, dir)
	check(r)
	must(t, r.close())
	if n := lines(t, filepath.Join(dir, "agents.log")); n != 0 {
		t.Errorf("the log holds %d lines after a clean close", n)
	}
	r = openReg(t, dir)
	check(r)
	must(t, r.close())
	for _, name := range []string{"agents.log", "agents.json"} {
		info, err := os.Stat(filepath.Join(dir, name))
		must(t, err)
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, info.Mode().Perm())
		}
	}
}

// A crash in the middle of an append leaves a torn last line: it is
// ignored, cut off, and the next register starts a line of its own.
func TestRegistryIgnoresATornLastLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := openReg(t, dir)
	must(t, r.register("a", "h-a", false))
	crashReg(r)
	log := filepath.Join(dir, "agents.log")
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString(`{"id":"b","ha`)
	must(t, err)
	f.Close()
	r = openReg(t, dir)
	wantAgent(t, r, "h-a", "a")
	must(t, r.register("c", "h-c", false))
	crashReg(r)
	r = openReg(t, dir)
	wantAgent(t, r, "h-a", "a")
	wantAgent(t, r, "h-c", "c")
	crashReg(r)
}

// A control plane from before the log kept agents.json alone: it is read,
// and registrations go on over it.
func TestRegistryReadsTheOldAgentsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "agents.json"), []byte("{\n  \"a\": \"h-a\",\n  \"b\": \"h-b\"\n}"), 0o600))
	r := openReg(t, dir)
	wantAgent(t, r, "h-a", "a")
	wantAgent(t, r, "h-b", "b")
	if ok, err := r.revoke("b"); !ok || err != nil {
		t.Fatalf("revoke(b) = %v, %v", ok, err)
	}
	must(t, r.register("c", "h-c", false))
	crashReg(r)
	r = openReg(t, dir)
	wantAgent(t, r, "h-a", "a")
	wantAgent(t, r, "h-b", "")
	wantAgent(t, r, "h-c", "c")
	crashReg(r)
}

// Open compacts a log grown past twice the live entries into agents.json
// and empties the log.
func TestRegistryCompactsAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := openReg(t, dir)
	must(t, r.register("a", "h-a", false))
	for i := range 3 {
		must(t, r.register("a", "h-a"+strings.Repeat("x", i), true))
	}
	crashReg(r)
	r = openReg(t, dir)
	if n := lines(t, filepath.Join(dir, "agents.log")); n != 0 {
		t.Errorf("the log holds %d lines after a compaction", n)
	}
	wantAgent(t, r, "h-axx", "a")
	crashReg(r)
	r = openReg(t, dir)
	wantAgent(t, r, "h-axx", "a")
	wantAgent(t, r, "h-a", "")
	crashReg(r)
}

// A registration costs the same at 10 agents and at 10,000: one line
// appended and synced, whatever the registry holds.
func BenchmarkRegister(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprint("agents=", n), func(b *testing.B) {
			r, err := openRegistry(b.TempDir(), quiet())
			if err != nil {
				b.Fatal(err)
			}
			defer crashReg(r)
			for i := range n {
				id := fmt.Sprint("pre-", i)
				r.byID[id], r.byHash["h-"+id] = "h-"+id, id
			}
			for i := 0; b.Loop(); i++ {
				if err := r.register(fmt.Sprint("new-", i), fmt.Sprint("h-new-", i), false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
