package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"
)

// started stands for the process's start: the package is initialised
// within milliseconds of it.
var started = time.Now()

// collectRuntime writes the Go runtime's and the process's figures, under
// the names the Prometheus Go client gives them, so that dashboards made
// for Go programs read them. A figure the platform does not give (the
// /proc ones off Linux) is left out.
func collectRuntime(s *scrape) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gauge := func(name, help string, v float64) {
		s.family(name, "gauge", help)
		s.sample("", v)
	}
	counter := func(name, help string, v float64) {
		s.family(name, "counter", help)
		s.sample("", v)
	}
	gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", float64(runtime.GOMAXPROCS(0)))
	s.family("go_info", "gauge", "Information about the Go environment.")
	s.sample("", 1, "version", runtime.Version())
	gauge("go_memstats_alloc_bytes", "Number of heap bytes allocated and currently in use.", float64(ms.HeapAlloc))
	counter("go_memstats_alloc_bytes_total", "Total number of heap bytes allocated, even if freed.", float64(ms.TotalAlloc))
	counter("go_memstats_mallocs_total", "Total number of heap objects allocated.", float64(ms.Mallocs))
	counter("go_memstats_frees_total", "Total number of heap objects freed.", float64(ms.Frees))
	gauge("go_memstats_heap_objects", "Number of heap objects currently allocated.", float64(ms.HeapObjects))
	gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes in spans in use.", float64(ms.HeapInuse))
	gauge("go_memstats_heap_idle_bytes", "Number of heap bytes in spans not in use.", float64(ms.HeapIdle))
	gauge("go_memstats_heap_released_bytes", "Number of heap bytes released to the OS.", float64(ms.HeapReleased))
	gauge("go_memstats_stack_inuse_bytes", "Number of bytes in stack spans in use.", float64(ms.StackInuse))
	gauge("go_memstats_sys_bytes", "Number of bytes obtained from the OS.", float64(ms.Sys))
	gauge("go_memstats_next_gc_bytes", "Heap size at which the next garbage collection starts.", float64(ms.NextGC))
	gauge("go_memstats_last_gc_time_seconds", "When the last garbage collection ended, in seconds since the epoch (0 if none yet).",
		float64(ms.LastGC)/1e9)

	// The pauses' quantiles, as the Go client gives them.
	gc := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&gc)
	s.family("go_gc_duration_seconds", "summary", "Stop-the-world pauses of the garbage collector.")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		s.sample("", gc.PauseQuantiles[i].Seconds(), "quantile", q)
	}
	s.sample("_sum", gc.PauseTotal.Seconds())
	s.sample("_count", float64(gc.NumGC))

	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpu.Seconds())
	}
	gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", float64(started.UnixNano())/1e9)
	if n, ok := openFDs(); ok {
		gauge("process_open_fds", "Number of open file descriptors.", float64(n))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		gauge("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	if st, ok := procStat(); ok {
		gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rssPages*os.Getpagesize()))
		gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize))
		gauge("go_threads", "Number of OS threads of the process.", float64(st.threads))
	}
}

// openFDs counts the process's open descriptors (the one reading them
// included, as the Go client counts).
func openFDs() (int, bool) {
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		if entries, err := os.ReadDir(dir); err == nil {
			return len(entries), true
		}
	}
	return 0, false
}

// stat is what /proc/self/stat says of the process.
type stat struct {
	threads, rssPages int
	vsize             uint64
}

// procStat reads /proc/self/stat (Linux only).
func procStat() (stat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return stat{}, false
	}
	// The command's name, in parentheses, may hold spaces; the fields
	// counted from 3 (state) follow its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22 {
		return stat{}, false
	}
	threads, err1 := strconv.Atoi(string(f[20-3]))
	vsize, err2 := strconv.ParseUint(string(f[23-3]), 10, 64)
	rss, err3 := strconv.Atoi(string(f[24-3]))
	if err1 != nil || err2 != nil || err3 != nil {
		return stat{}, false
	}
	return stat{threads: threads, rssPages: rss, vsize: vsize}, true
}
