package settings

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/spf13/pflag"
)

// Reloader applies a changed config file to a running program. Live
// settings apply (through Apply) to what starts after the reload; a change
// to any other is reported as needing a restart and left alone. An invalid
// file, or live settings Apply refuses, keep the running configuration,
// and the log says why.
type Reloader struct {
	Log *slog.Logger
	// Bind declares the program's settings on a new flag set, each stored
	// where apply reads it, and returns apply: it applies the live
	// settings of that flag set (changed: their file keys, those that
	// changed) or says why it cannot.
	Bind func(fs *pflag.FlagSet) (apply func(changed []string) error)

	mu      sync.Mutex
	inForce *Resolved      // how the settings in force were resolved
	fs      *pflag.FlagSet // the settings in force
}

// NewReloader is a Reloader of the settings in force, resolved as
// inForce says into fs.
func NewReloader(inForce *Resolved, fs *pflag.FlagSet, log *slog.Logger, bind func(*pflag.FlagSet) func([]string) error) *Reloader {
	return &Reloader{Log: log, Bind: bind, inForce: inForce, fs: fs}
}

// Reload reads the settings again: the command line as it was, the
// environment, and the config file as it is now.
func (rl *Reloader) Reload(why string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	fs := pflag.NewFlagSet(rl.fs.Name(), pflag.ContinueOnError)
	apply := rl.Bind(fs)
	notReloaded := func(err error) {
		rl.Log.Error("config not reloaded; the running configuration stays", "why", why, "err", strings.Join(strings.Fields(err.Error()), " "))
	}
	next, err := rl.inForce.Again(fs)
	if err != nil {
		notReloaded(err)
		return
	}
	changed, restart := rl.inForce.Table.Changes(rl.fs, fs)
	for _, s := range restart {
		rl.Log.Warn("config changed a setting that needs a restart to apply", "setting", s.FileKey(), "why", why)
	}
	var live []string
	for _, s := range changed {
		live = append(live, s.FileKey())
	}
	if len(live) == 0 {
		rl.Log.Info("config reloaded; nothing to apply", "why", why, "file", next.File)
		return
	}
	if err := apply(live); err != nil {
		notReloaded(err)
		return
	}
	// The live settings are now in force; the others stay as they started.
	rl.inForce.Table.ApplyLive(rl.fs, fs)
	rl.Log.Info("config reloaded", "why", why, "file", next.File, "applied", live)
}

// Watch reloads on SIGHUP (hup) and when the config file changes, until
// ctx ends (see Watch).
func (rl *Reloader) Watch(ctx context.Context, hup <-chan os.Signal) {
	Watch(ctx, rl.inForce.File, hup, rl.Log, rl.Reload)
}
