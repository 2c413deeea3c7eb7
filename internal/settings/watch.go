package settings

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloadSettle is how long the config file must stay unchanged before it is
// read: an editor writes a file in several steps.
const reloadSettle = 200 * time.Millisecond

// Watch calls reload on each signal from hup (SIGHUP), why "SIGHUP", and
// when the config file (file, "" for none) changes and has stayed so a
// moment, why "the config file changed", until ctx ends; it says on log
// what it cannot follow. It follows the file's directory, so an editor
// that replaces the file (write a temporary, rename it over) is seen too,
// and, when the file is a symlink, the directory of the file it leads to
// (see configFollower). reload runs on Watch's goroutine, one at a time.
func Watch(ctx context.Context, file string, hup <-chan os.Signal, log *slog.Logger, reload func(why string)) {
	var events chan fsnotify.Event
	var errs chan error
	var f *configFollower
	if file != "" {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			defer w.Close()
			f, err = followConfig(w, file)
		}
		if err != nil {
			log.Warn("cannot follow the config file; SIGHUP still reloads it", "file", file, "err", err)
		} else {
			events, errs = w.Events, w.Errors
		}
	}
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload("SIGHUP")
		case ev := <-events:
			if f.changed(ev) {
				settle.Reset(reloadSettle)
			}
		case err := <-errs:
			log.Warn("following the config file", "file", file, "err", err)
		case <-settle.C:
			reload("the config file changed")
		}
	}
}

// configFollower tells which file events change the config file: the file
// itself, replaced or written in place; and, when it is a symlink (config
// management, a mounted ConfigMap), the file it leads to, written where it
// lies, or a link on the way re-pointed (a ConfigMap's "..data" swap).
type configFollower struct {
	w       *fsnotify.Watcher
	file    string // absolute, as named
	realDir string // the file's directory with its own links resolved
	target  string // where its links lead; "" when it is no link or leads nowhere now
}

func followConfig(w *fsnotify.Watcher, file string) (*configFollower, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	f := &configFollower{w: w, file: abs, realDir: filepath.Dir(abs)}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		return nil, err
	}
	if d, err := filepath.EvalSymlinks(f.realDir); err == nil {
		f.realDir = d
	}
	f.retarget()
	return f, nil
}

// retarget resolves the file's links again, follows the directory of a
// new target, and reports whether the target changed.
func (f *configFollower) retarget() bool {
	t, err := filepath.EvalSymlinks(f.file)
	if err != nil || t == f.file {
		t = ""
	}
	if t == f.target {
		return false
	}
	// The target's directory is followed too, unless it is the file's own
	// (reached by another path, it is the same watch).
	if f.target != "" && filepath.Dir(f.target) != f.realDir {
		_ = f.w.Remove(filepath.Dir(f.target))
	}
	f.target = t
	if t != "" && filepath.Dir(t) != f.realDir {
		_ = f.w.Add(filepath.Dir(t)) // if it cannot be followed, edits there need a SIGHUP
	}
	return true
}

// changed reports whether ev may have changed the config file.
func (f *configFollower) changed(ev fsnotify.Event) bool {
	if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) == 0 {
		return false
	}
	name, _ := filepath.Abs(ev.Name)
	switch {
	case name == f.file:
		f.retarget()
		return true
	case f.target != "" && name == f.target:
		return true
	case f.target != "" && filepath.Dir(f.target) == f.realDir && name == filepath.Join(filepath.Dir(f.file), filepath.Base(f.target)):
		return true // the target, beside the file, named through the file's directory
	case filepath.Dir(name) == filepath.Dir(f.file):
		return f.retarget()
	}
	return false
}
