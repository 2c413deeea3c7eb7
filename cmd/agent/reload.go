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
		if rl.fs.Lookup(s.name) == nil || reflect.DeepEqual(flagValue(rl.fs, s), flagValue(fs, s)) {
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
	return agent.Live{Executor: exe, Models: f.models, Policy: f.policy(), MaxConcurrent: f.maxConcurrent,
		ReplyTimeout: f.executor.replyTimeout, Timeouts: runner.Timeouts{Attempt: f.attemptTimeouts, FirstEvent: f.firstEventTimeouts}}
}

// watch reloads on SIGHUP (hup) and when the config file changes, until
// ctx ends. It follows the file's directory, so an editor that replaces
// the file (write a temporary, rename it over) is seen too.
func (rl *reloader) watch(ctx context.Context, hup <-chan os.Signal) {
	var events chan fsnotify.Event
	var errs chan error
	file := rl.inForce.file
	if file != "" {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			defer w.Close()
			err = w.Add(filepath.Dir(file))
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
			if filepath.Clean(ev.Name) == filepath.Clean(file) && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
				settle.Reset(reloadSettle)
			}
		case err := <-errs:
			rl.log.Warn("following the config file", "file", file, "err", err)
		case <-settle.C:
			rl.reload("the config file changed")
		}
	}
}
