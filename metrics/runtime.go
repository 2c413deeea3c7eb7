package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/procstat"
)

// started stands for the process's start where /proc does not say it:
// the package is initialised within milliseconds of it.
var started = time.Now()

// collectRuntime writes the Go runtime's and the process's figures, under
// the names the Prometheus Go client gives them, so that dashboards made
// for Go programs read them. A figure the platform does not give (the
// /proc ones off Linux) is left out.
func collectRuntime(s *scrape) {
	threads, _ := runtime.ThreadCreateProfile(nil)
	s.single("go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	s.single("go_threads", "gauge", "Number of OS threads created.", float64(threads))
	s.single("go_sched_gomaxprocs_threads", "gauge", "The current runtime.GOMAXPROCS setting.", float64(runtime.GOMAXPROCS(0)))
	s.family("go_info", "gauge", "Information about the Go environment.")
	s.sample("", 1, "version", runtime.Version())

	settings := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(settings)
	if settings[0].Value.Kind() == metrics.KindUint64 {
		// GOGC=off reads as 2^64-1, as the Go client shows it too.
		s.single("go_gc_gogc_percent", "gauge", "Heap size target percentage configured by GOGC.", float64(settings[0].Value.Uint64()))
	}
	if settings[1].Value.Kind() == metrics.KindUint64 {
		s.single("go_gc_gomemlimit_bytes", "gauge", "Go runtime memory limit configured by GOMEMLIMIT.", float64(settings[1].Value.Uint64()))
	}

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, m := range []struct {
		name, typ, help string
		v               uint64
	}{
		{"go_memstats_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", ms.HeapAlloc},
		{"go_memstats_alloc_bytes_total", "counter", "Total number of heap bytes allocated, even if freed.", ms.TotalAlloc},
		{"go_memstats_buck_hash_sys_bytes", "gauge", "Number of bytes used by the profiling bucket hash table.", ms.BuckHashSys},
		{"go_memstats_frees_total", "counter", "Total number of heap objects freed.", ms.Frees},
		{"go_memstats_gc_sys_bytes", "gauge", "Number of bytes used for garbage collection system metadata.", ms.GCSys},
		{"go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", ms.HeapAlloc},
		{"go_memstats_heap_idle_bytes", "gauge", "Number of heap bytes waiting to be used.", ms.HeapIdle},
		{"go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", ms.HeapInuse},
		{"go_memstats_heap_objects", "gauge", "Number of currently allocated objects.", ms.HeapObjects},
		{"go_memstats_heap_released_bytes", "gauge", "Number of heap bytes released to the OS.", ms.HeapReleased},
		{"go_memstats_heap_sys_bytes", "gauge", "Number of heap bytes obtained from the OS.", ms.HeapSys},
		{"go_memstats_mallocs_total", "counter", "Total number of heap objects allocated.", ms.Mallocs},
		{"go_memstats_mcache_inuse_bytes", "gauge", "Number of bytes in use by mcache structures.", ms.MCacheInuse},
		{"go_memstats_mcache_sys_bytes", "gauge", "Number of bytes used for mcache structures obtained from the OS.", ms.MCacheSys},
		{"go_memstats_mspan_inuse_bytes", "gauge", "Number of bytes in use by mspan structures.", ms.MSpanInuse},
		{"go_memstats_mspan_sys_bytes", "gauge", "Number of bytes used for mspan structures obtained from the OS.", ms.MSpanSys},
		{"go_memstats_next_gc_bytes", "gauge", "Heap size at which the next garbage collection starts.", ms.NextGC},
		{"go_memstats_other_sys_bytes", "gauge", "Number of bytes used for other system allocations.", ms.OtherSys},
		{"go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from the OS for stacks, in use.", ms.StackInuse},
		{"go_memstats_stack_sys_bytes", "gauge", "Number of bytes obtained from the OS for stacks.", ms.StackSys},
		{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from the OS.", ms.Sys},
	} {
		s.single(m.name, m.typ, m.help, float64(m.v))
	}
	s.single("go_memstats_last_gc_time_seconds", "gauge", "When the last garbage collection ended, in seconds since the epoch (0 if none yet).",
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
		s.single("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpu.Seconds())
	}
	if n, ok := openFDs(); ok {
		s.single("process_open_fds", "gauge", "Number of open file descriptors.", float64(n))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		s.single("process_max_fds", "gauge", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		s.single("process_virtual_memory_max_bytes", "gauge", "Maximum amount of virtual memory available in bytes.", float64(lim.Cur))
	}
	start := float64(started.UnixNano()) / 1e9
	if st, ok := procStat(); ok {
		s.single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", float64(st.rssPages*uint64(os.Getpagesize())))
		s.single("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", float64(st.vsize))
		if boot, ok := bootTime(); ok {
			// Read afresh at each scrape, it follows corrections to the
			// clock (an agent started before NTP set it).
			start = boot + float64(st.startTicks)/userHZ
		}
	}
	s.single("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", start)
}

// openFDs counts the process's open descriptors as the Go client does:
// on Linux the one reading /proc/self/fd is counted, and elsewhere the one
// reading /dev/fd is not.
func openFDs() (int, bool) {
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		return len(entries), true
	}
	if entries, err := os.ReadDir("/dev/fd"); err == nil && len(entries) > 0 {
		return len(entries) - 1, true
	}
	return 0, false
}

// stat is what /proc/self/stat says of the process.
type stat struct {
	rssPages, vsize, startTicks uint64
}

// procStat reads /proc/self/stat (Linux only): fields 22 (starttime), 23
// (vsize) and 24 (rss).
func procStat() (stat, bool) {
	f, err := procstat.Read("self")
	if err != nil {
		return stat{}, false
	}
	start, ok1 := f.Uint(22)
	vsize, ok2 := f.Uint(23)
	rss, ok3 := f.Uint(24)
	return stat{rssPages: rss, vsize: vsize, startTicks: start}, ok1 && ok2 && ok3
}

// userHZ is the unit of /proc/self/stat's times: 100 a second on every
// Linux the Go client knows of, which assumes it too.
const userHZ = 100

// bootTime is when the system booted, in seconds since the epoch, from
// /proc/stat's btime line (Linux only).
func bootTime() (float64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			v, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 64)
			return float64(v), err == nil
		}
	}
	return 0, false
}
