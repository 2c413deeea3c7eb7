package agent

import (
	"context"
	"os"
	"sync"
	"syscall"
)

// RunSignalled is Run as `agent run` runs it, stopped by signals: the
// first one on sigs drains (Run's context ends: no new claims, running
// attempts left to their keepers or drained); a second one, or SIGQUIT,
// stops at once (Abort). Each of alongside runs beside Run with Run's
// context (the config file's reloader) and is waited for.
func (a *Agent) RunSignalled(ctx context.Context, sigs <-chan os.Signal, alongside ...func(context.Context)) error {
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{}) // Run returned
	var wg sync.WaitGroup
	defer func() {
		close(stopped)
		cancel()
		wg.Wait()
	}()
	wg.Go(func() {
		for draining := false; ; draining = true {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGQUIT || draining {
					a.log.Warn("stopping at once: running tasks are cancelled, pending records stay on disk", "signal", sig.String())
					a.Abort()
					cancel()
					return
				}
				a.log.Info("stopping: draining (a second signal or SIGQUIT stops at once)", "signal", sig.String())
				cancel()
			case <-stopped:
				return
			}
		}
	})
	for _, f := range alongside {
		wg.Go(func() { f(ctx) })
	}
	return a.Run(ctx)
}
