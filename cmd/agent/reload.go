package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/runner"
)

// reloadSettle is how long the config file must stay unchanged before it is
// read: an editor writes a file in several steps.
const reloadSettle = 200 * time.Millisecond

// reloader applies a changed config file to a running agent. Live settings
// apply to attempts that start after the reload; a change to any other is
// reported as needing a restart and left alone. An invalid file, or one
// whose executor cannot be made, keeps the running configuration and says
// why.
type reloader struct {
	agent *agent.Agent
	level *slog.LevelVar
	log   *slog.Logger

	mu      sync.Mutex
	inForce *resolved      // how the settings in force were resolved
	fs      *pflag.FlagSet // the settings in force
	exe     runner.Executor
}

// reload reads the settings again: the command line as it was, the
// environment, and the config file as it is now.
func (rl *reloader) reload(why string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	var f runFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.bind(fs)
	next, err := rl.inForce.again(fs)
	if err != nil {
		rl.log.Error("config not reloaded; the running configuration stays", "why", why, "err", oneLine(err.Error()))
		return
	}
	var live, restart []string
	executorChanged := false
	for _, s := range rl.inForce.table.list {
		if bound(rl.fs, s) == nil || reflect.DeepEqual(flagValue(rl.fs, s), flagValue(fs, s)) {
			continue
		}
		if !s.live {
			restart = append(restart, s.fileKey())
			continue
		}
		live = append(live, s.fileKey())
		executorChanged = executorChanged || strings.HasPrefix(s.fileKey(), "executor.")
	}
	for _, k := range restart {
		rl.log.Warn("config changed a setting that needs a restart to apply", "setting", k, "why", why)
	}
	if len(live) == 0 {
		rl.log.Info("config reloaded; nothing to apply", "why", why, "file", next.file)
		return
	}
	exe := rl.exe
	if executorChanged {
		if exe, err = f.executor.build(); err != nil {
			rl.log.Error("config not reloaded; the running configuration stays", "why", why, "err", oneLine(err.Error()))
			return
		}
	}
	if err := rl.agent.Reconfigure(liveSettings(f, exe)); err != nil {
		rl.log.Error("config not reloaded; the running configuration stays", "why", why, "err", oneLine(err.Error()))
		return
	}
	rl.level.Set(logLevel(f.logLevel).Level())
	// The live settings are now in force; the others stay as they started.
	for _, name := range liveNames(rl.inForce.table) {
		if rl.fs.Lookup(name) != nil {
			s := rl.inForce.table.lookup(name)
			if err := setFlag(rl.fs, s, flagValue(fs, s)); err != nil {
				panic(fmt.Sprintf("setting %s: %v", name, err)) // same flag type on both sides
			}
		}
	}
	rl.exe = exe
	rl.log.Info("config reloaded", "why", why, "file", next.file, "applied", live)
}

func liveNames(t *settingsTable) []string {
	var names []string
	for _, s := range t.list {
		if s.live {
			names = append(names, s.name)
		}
	}
	return names
}

// liveSettings is the live part of agent run's settings.
func liveSettings(f runFlags, exe runner.Executor) agent.Live {
	return agent.Live{Executor: exe, Models: f.models, Policy: f.policy(), MaxConcurrent: f.maxConcurrent, MaxStarts: f.maxStarts,
		ApprovalTimeout: f.executor.runnerApprovalTimeout(), Timeouts: runner.Timeouts{Attempt: f.attemptTimeouts, FirstEvent: f.firstEventTimeouts}, Budget: f.budget()}
}

// watch reloads on SIGHUP (hup) and when the config file changes, until
// ctx ends. It follows the file's directory, so an editor that replaces
// the file (write a temporary, rename it over) is seen too, and, when the
// file is a symlink, the directory of the file it leads to (see configFollower).
func (rl *reloader) watch(ctx context.Context, hup <-chan os.Signal) {
	var events chan fsnotify.Event
	var errs chan error
	file := rl.inForce.file
	var f *configFollower
	if file != "" {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			defer w.Close()
			f, err = followConfig(w, file)
		}
		if err != nil {
			rl.log.Warn("cannot follow the config file; SIGHUP still reloads it", "file", file, "err", err)
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
			rl.reload("SIGHUP")
		case ev := <-events:
			if f.changed(ev) {
				settle.Reset(reloadSettle)
			}
		case err := <-errs:
			rl.log.Warn("following the config file", "file", file, "err", err)
		case <-settle.C:
			rl.reload("the config file changed")
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
