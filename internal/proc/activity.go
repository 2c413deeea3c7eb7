package proc

// Activity is what an attempt's processes have done so far, summed over
// every process that carries its mark (MarkEnv) now: the CPU time they and
// their reaped children used, in clock ticks, and the bytes they read and
// wrote (any I/O: files, pipes, sockets), with how many there are and how
// many of those are stopped (SIGSTOP, a debugger). Two readings a while
// apart tell an attempt at work in silence (a long test run, a build) from
// a hung one: the sums grow only while its processes work.
type Activity struct {
	CPUTicks  uint64
	IOBytes   uint64
	Processes int
	Stopped   int
}

// Busier reports whether a shows work done since before: more CPU time or
// more I/O by the attempt's processes.
func (a Activity) Busier(before Activity) bool {
	return a.CPUTicks > before.CPUTicks || a.IOBytes > before.IOBytes
}

// MarkActivity reads the activity of the processes carrying mark. A
// process whose counters cannot be read (another user's I/O, gone) adds
// what could be read of it. Zero where processes cannot be listed by
// their environment (not Linux).
func MarkActivity(mark string) Activity {
	var a Activity
	for _, pid := range markedProcesses(func(m string) bool { return m == mark }) {
		cpu, stopped, ok := cpuOf(pid)
		if !ok {
			continue
		}
		a.Processes++
		a.CPUTicks += cpu
		if stopped {
			a.Stopped++
		}
		a.IOBytes += ioOf(pid)
	}
	return a
}
