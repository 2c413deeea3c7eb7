package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// tree makes files (and their directories) under a temporary root,
// resolved, and returns it.
func tree(t *testing.T, files ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func rulePaths(root string, rules []Rule) map[string]Access {
	m := map[string]Access{}
	for _, r := range rules {
		rel, err := filepath.Rel(root, r.Path)
		if err != nil {
			rel = r.Path
		}
		m[rel] = r.Access
	}
	return m
}

// A denied path inside a readable hierarchy is cut out of it: every entry
// beside it, at every level down to it, gets the grant; the directories on
// the way get none; the denied path gets none.
func TestADeniedPathIsCutOutOfItsHierarchy(t *testing.T) {
	root := tree(t, "home/.ssh/id", "home/.local/state/agent/agent-token", "home/.local/state/other/x",
		"home/.local/share/y", "home/src/repo/main.go", "etc/hosts")
	rules, err := Policy{Read: []string{root}, Deny: []string{filepath.Join(root, "home/.local/state/agent")}}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	got := rulePaths(root, rules)
	want := map[string]Access{
		"etc":                     ReadAccess,
		"home/.ssh":               ReadAccess,
		"home/src":                ReadAccess,
		"home/.local/share":       ReadAccess,
		"home/.local/state/other": ReadAccess,
	}
	if len(got) != len(want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("rule for %s: %v, want %v (all: %v)", p, got[p], a, got)
		}
	}
}

// A grant inside a denied directory (a task's work directory inside the
// data directory) stands; the rest of the denied directory gets nothing.
func TestAGrantInsideADeniedPathStands(t *testing.T) {
	root := tree(t, "data/agent-token", "data/work/t-1/f", "data/work/t-2/f", "tmp/x")
	data := filepath.Join(root, "data")
	work := filepath.Join(data, "work", "t-1")
	rules, err := Policy{Read: []string{root}, Write: []string{work, filepath.Join(root, "tmp")}, Deny: []string{data}}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	got := rulePaths(root, rules)
	if got["data/work/t-1"] != WriteAccess {
		t.Errorf("the work directory's grant: %v, want write (all: %v)", got["data/work/t-1"], got)
	}
	for _, p := range []string{"data", "data/work", "data/work/t-2", "data/agent-token", "."} {
		if _, ok := got[p]; ok {
			t.Errorf("%s has a rule (%v); it is denied or on the way to a denied path", p, got[p])
		}
	}
	if got["tmp"] != WriteAccess {
		t.Errorf("tmp: %v, want write", got["tmp"])
	}
}

// A symbolic link beside a denied path gets no rule: a rule on it would be
// a rule on where it leads, the denied path itself here.
func TestALinkBesideADeniedPathGetsNoRule(t *testing.T) {
	root := tree(t, "home/.local/state/agent/agent-token", "home/notes")
	if err := os.Symlink(filepath.Join(root, "home/.local/state/agent"), filepath.Join(root, "home/agent-data")); err != nil {
		t.Fatal(err)
	}
	rules, err := Policy{Read: []string{root}, Deny: []string{filepath.Join(root, "home/agent-data")}}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	got := rulePaths(root, rules)
	if _, ok := got["home/agent-data"]; ok {
		t.Errorf("the link has a rule: %v", got)
	}
	if _, ok := got["home/.local/state/agent"]; ok {
		t.Errorf("the denied directory, named through a link, has a rule: %v", got)
	}
	if got["home/notes"] != ReadAccess {
		t.Errorf("home/notes: %v, want read (all %v)", got["home/notes"], got)
	}
}

// ListAll adds one listing right at the root; paths that do not exist are
// left out without an error.
func TestListAllAndMissingPaths(t *testing.T) {
	root := tree(t, "a/secret", "b")
	rules, err := Policy{Read: []string{root, filepath.Join(root, "nowhere")}, Deny: []string{filepath.Join(root, "a/secret"), "/no/such/file"}, ListAll: true}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rules, Rule{"/", ReadDir}) {
		t.Errorf("no listing rule at the root: %v", rules)
	}
	got := rulePaths(root, rules)
	if got["b"] != ReadAccess {
		t.Errorf("b: %v (all %v)", got["b"], got)
	}
	if _, ok := got["a/secret"]; ok {
		t.Errorf("the denied file has a rule: %v", got)
	}
}

// A writable hierarchy that holds a denied path is split like a readable
// one: an operator's --isolation-write of the home directory does not
// give a task the agent's data directory in it.
func TestAWritableHierarchyIsSplitToo(t *testing.T) {
	root := tree(t, "home/.local/state/agent/agent-token", "home/src/x")
	rules, err := Policy{Write: []string{filepath.Join(root, "home")}, Deny: []string{filepath.Join(root, "home/.local/state/agent")}}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	got := rulePaths(root, rules)
	if got["home/src"] != WriteAccess || len(got) != 1 {
		t.Errorf("rules %v, want write beneath home/src alone", got)
	}
}

// A denied path that does not exist yet still splits the hierarchy that
// would hold it: its nearest existing directory gets no rule of its own,
// only its entries do, so that the path, made later, has none.
func TestAMissingDeniedPathIsCutOutBeforeItIsMade(t *testing.T) {
	root := tree(t, "home/.config/gh-not/x", "home/notes", "etc/hosts")
	rules, err := Policy{Read: []string{root}, Deny: []string{filepath.Join(root, "home/.aws"), filepath.Join(root, "home/.config/gcloud/creds"),
		filepath.Join(root, "home/.missing/deeper/still")}}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	got := rulePaths(root, rules)
	want := map[string]Access{"etc": ReadAccess, "home/notes": ReadAccess, "home/.config/gh-not": ReadAccess}
	if len(got) != len(want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("rule for %s: %v, want %v (all: %v)", p, got[p], a, got)
		}
	}
}
