package cli

import (
	"io"
	"time"
)

// DrainAfterExit takes what a CLI wrote before it exited: every item of
// ch, which its reader closes at the end of the CLI's stdout. Past grace,
// it closes stdout, held open by something out of reach (a process that
// inherited it), so that the reader ends.
func DrainAfterExit[T any](ch <-chan T, grace time.Duration, stdout io.Closer, take func(T)) {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for ch != nil {
		select {
		case item, ok := <-ch:
			if !ok {
				ch = nil
				continue
			}
			take(item)
		case <-timer.C:
			stdout.Close()
		}
	}
}
