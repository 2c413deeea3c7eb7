//go:build race

package outbox

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts say nothing under it.
const raceEnabled = true
