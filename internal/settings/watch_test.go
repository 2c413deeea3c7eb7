package settings

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fsnotify/fsnotify"

	"github.com/edgeagent/agent/internal/testkit"
)

// watching runs Watch on file until the test ends, and counts the reloads
// it asks for.
type watching struct {
	hup chan os.Signal
	log bytes.Buffer // written by Watch's goroutine: read it after stop

	mu    sync.Mutex
	whys  []string
	stop  func()
	ended chan struct{}
}

func watch(t *testing.T, file string) *watching {
	t.Helper()
	w := &watching{hup: make(chan os.Signal), ended: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(&w.log, nil))
	go func() {
		defer close(w.ended)
		Watch(ctx, file, w.hup, log, func(why string) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.whys = append(w.whys, why)
		})
	}()
	w.stop = func() { cancel(); <-w.ended }
	t.Cleanup(w.stop)
	// A SIGHUP is taken once Watch follows the file: what the test does
	// after it is seen.
	w.sighup(t)
	return w
}

func (w *watching) reloads() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.whys)
}

func (w *watching) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.whys[len(w.whys)-1]
}

func (w *watching) sighup(t *testing.T) {
	t.Helper()
	n := w.reloads()
	w.hup <- os.Interrupt
	testkit.WaitFor(t, "the reload on SIGHUP", func() bool { return w.reloads() > n })
	if why := w.last(); why != "SIGHUP" {
		t.Fatalf("reloaded for %q, want SIGHUP", why)
	}
}

// after does change and waits for the reload it makes.
func (w *watching) after(t *testing.T, what string, change func()) {
	t.Helper()
	n := w.reloads()
	change()
	testkit.WaitFor(t, "a reload after "+what, func() bool { return w.reloads() > n })
	if why := w.last(); why != "the config file changed" {
		t.Fatalf("after %s, reloaded for %q", what, why)
	}
}

func TestWatchReloadsWhenTheFileChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "prog.toml")
	writeFile(t, file, "workers = 1\n")
	w := watch(t, file)
	w.after(t, "a write in place", func() { writeFile(t, file, "workers = 2\n") })
	w.after(t, "an editor's rename over it", func() {
		tmp := filepath.Join(dir, ".prog.toml.swp")
		writeFile(t, tmp, "workers = 3\n")
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	})
	w.sighup(t)
}

// A config file that is a symlink (config management, a mounted
// ConfigMap) is followed to its target, and to a new target when the
// link is re-pointed.
func TestWatchFollowsASymlinkedFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	conf, v1, v2 := filepath.Join(root, "conf"), filepath.Join(root, "v1"), filepath.Join(root, "v2")
	for _, d := range []string{conf, v1, v2} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(v1, "prog.toml"), "workers = 1\n")
	writeFile(t, filepath.Join(v2, "prog.toml"), "workers = 2\n")
	file := filepath.Join(conf, "prog.toml")
	if err := os.Symlink(filepath.Join(v1, "prog.toml"), file); err != nil {
		t.Fatal(err)
	}
	w := watch(t, file)
	w.after(t, "a write to the target", func() { writeFile(t, filepath.Join(v1, "prog.toml"), "workers = 5\n") })
	w.after(t, "the link re-pointed", func() {
		tmp := filepath.Join(conf, ".new")
		if err := os.Symlink(filepath.Join(v2, "prog.toml"), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	})
	w.after(t, "a write to the new target", func() { writeFile(t, filepath.Join(v2, "prog.toml"), "workers = 6\n") })
}

// Which events count: the file's own and its target's, not a
// neighbour's, nor the former target's once the link is re-pointed.
func TestFollowerTellsTheFilesEvents(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	conf, v1, v2 := filepath.Join(root, "conf"), filepath.Join(root, "v1"), filepath.Join(root, "v2")
	for _, d := range []string{conf, v1, v2} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t1, t2 := filepath.Join(v1, "prog.toml"), filepath.Join(v2, "prog.toml")
	writeFile(t, t1, "")
	writeFile(t, t2, "")
	file := filepath.Join(conf, "prog.toml")
	if err := os.Symlink(t1, file); err != nil {
		t.Fatal(err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	f, err := followConfig(fw, file)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(name string, op fsnotify.Op) fsnotify.Event { return fsnotify.Event{Name: name, Op: op} }
	for _, tc := range []struct {
		what string
		ev   fsnotify.Event
		want bool
	}{
		{"the file written", ev(file, fsnotify.Write), true},
		{"the target written", ev(t1, fsnotify.Write), true},
		{"the file's mode changed", ev(file, fsnotify.Chmod), false},
		{"a neighbour of the target written", ev(filepath.Join(v1, "other.toml"), fsnotify.Write), false},
		{"a neighbour of the file made, the link unchanged", ev(filepath.Join(conf, "other.toml"), fsnotify.Create), false},
	} {
		if got := f.changed(tc.ev); got != tc.want {
			t.Errorf("%s: changed = %t, want %t", tc.what, got, tc.want)
		}
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t2, file); err != nil {
		t.Fatal(err)
	}
	if !f.changed(ev(file, fsnotify.Create)) {
		t.Fatal("the link re-pointed: not a change")
	}
	if f.changed(ev(t1, fsnotify.Write)) {
		t.Error("the former target written: taken for a change")
	}
	if !f.changed(ev(t2, fsnotify.Write)) {
		t.Error("the new target written: not a change")
	}
}

// A file that cannot be followed is said so, and SIGHUP still reloads.
func TestWatchWithoutTheFilesDirectory(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "gone", "prog.toml")
	w := watch(t, file)
	w.sighup(t)
	w.stop()
	if !strings.Contains(w.log.String(), "cannot follow the config file; SIGHUP still reloads it") {
		t.Errorf("log: %q", w.log.String())
	}
}
