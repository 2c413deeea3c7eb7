//go:build !linux

package proc

// BecomeSubreaper does nothing where the platform has no child subreaper.
func BecomeSubreaper() error { return nil }

// sweepMark cannot list processes by their environment here; the sweep
// relies on the process group alone.
func sweepMark(func(mark string) bool) int { return 0 }

// endKeepers does nothing: attempts run under a keeper on Linux only.
func endKeepers(func(mark string) bool) {}

// killOrphans does nothing: there is no subreaper here.
func killOrphans() int { return 0 }

// markedProcesses cannot list processes by their environment here.
func markedProcesses(func(mark string) bool) []int { return nil }

// cpuOf cannot read a process's CPU time here.
func cpuOf(int) (uint64, bool, bool) { return 0, false, false }

// ioOf cannot read a process's I/O here.
func ioOf(int) uint64 { return 0 }

// isKeeperProcess is false: there are no keepers here.
func isKeeperProcess(int) bool { return false }

// processMark cannot read another process's environment here.
func processMark(int) string { return "" }

// sweepMarkBut cannot list processes by their environment here.
func sweepMarkBut(func(mark string) bool, int) int { return 0 }
