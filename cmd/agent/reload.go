package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/runner"
)

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
	inForce *settings.Resolved // how the settings in force were resolved
	fs      *pflag.FlagSet     // the settings in force
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
	next, err := rl.inForce.Again(fs)
	if err != nil {
		rl.log.Error("config not reloaded; the running configuration stays", "why", why, "err", oneLine(err.Error()))
		return
	}
	changed, restart := rl.inForce.Table.Changes(rl.fs, fs)
	for _, s := range restart {
		rl.log.Warn("config changed a setting that needs a restart to apply", "setting", s.FileKey(), "why", why)
	}
	var live []string
	executorChanged := false
	for _, s := range changed {
		live = append(live, s.FileKey())
		executorChanged = executorChanged || strings.HasPrefix(s.FileKey(), "executor.")
	}
	if len(live) == 0 {
		rl.log.Info("config reloaded; nothing to apply", "why", why, "file", next.File)
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
	rl.inForce.Table.ApplyLive(rl.fs, fs)
	rl.exe = exe
	rl.log.Info("config reloaded", "why", why, "file", next.File, "applied", live)
}

// liveSettings is the live part of agent run's settings.
func liveSettings(f runFlags, exe runner.Executor) agent.Live {
	return agent.Live{Executor: exe, Models: f.models, Policy: f.policy(), MaxConcurrent: f.maxConcurrent, MaxStarts: f.maxStarts,
		ApprovalTimeout: f.executor.settings().RunnerApprovalTimeout(), Timeouts: runner.Timeouts{Attempt: f.attemptTimeouts, FirstEvent: f.firstEventTimeouts}, Budget: f.budget()}
}

// watch reloads on SIGHUP (hup) and when the config file changes, until
// ctx ends (settings.Watch).
func (rl *reloader) watch(ctx context.Context, hup <-chan os.Signal) {
	settings.Watch(ctx, rl.inForce.File, hup, rl.log, rl.reload)
}
