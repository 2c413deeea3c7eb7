package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// median of xs; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuTime is this process's user plus system time so far (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// statusField reads one "Name:  N kB" field of /proc/PID/status, in bytes.
func statusField(pid, name string) (int64, error) {
	v, err := statusFields(pid, name)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// statusFields reads fields of /proc/PID/status in kB, in bytes, from one
// read of the file: figures of the same moment.
func statusFields(pid string, names ...string) ([]int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(names))
	found := make([]bool, len(names))
	for l := range strings.SplitSeq(string(b), "\n") {
		name, v, _ := strings.Cut(l, ":")
		i := slices.Index(names, name)
		if f := strings.Fields(v); i >= 0 && len(f) > 0 {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return nil, err
			}
			out[i], found[i] = n<<10, true
		}
	}
	if i := slices.Index(found, false); i >= 0 {
		return nil, fmt.Errorf("/proc/%s/status has no %s", pid, names[i])
	}
	return out, nil
}

// selfRSS is this process's resident set (VmRSS), in bytes.
func selfRSS() int64 {
	n, _ := statusField("self", "VmRSS")
	return n
}

// onCPU is the time a process's threads have run so far, in nanoseconds,
// from /proc/PID/task/*/schedstat (finer than the clock ticks of stat).
func onCPU(pid int) (time.Duration, error) {
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(dirs) == 0 {
		return 0, fmt.Errorf("no schedstat for process %d", pid)
	}
	var total time.Duration
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		total += time.Duration(n)
	}
	return total, nil
}

// mountOf returns the mount point and file system type of path, from
// /proc/mounts (the longest mount point that holds it).
func mountOf(path string) (point, fstype string) {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "?", "?"
	}
	defer f.Close()
	abs, _ := filepath.Abs(path)
	abs, _ = filepath.EvalSymlinks(abs)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 3 {
			continue
		}
		mp := fl[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(point) {
			point, fstype = mp, fl[2]
		}
	}
	return point, fstype
}

// sameDevice reports whether a and b are on one file system.
func sameDevice(a, b string) bool {
	var sa, sb syscall.Stat_t
	return syscall.Stat(a, &sa) == nil && syscall.Stat(b, &sb) == nil && sa.Dev == sb.Dev
}

// writable reports whether dir takes a new directory.
func writable(dir string) bool {
	d, err := os.MkdirTemp(dir, "bench-probe-")
	if err != nil {
		return false
	}
	os.Remove(d)
	return true
}

// copyTree copies the regular files and directories under src to dst,
// leaving out files named lock (a copy gets its own).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case d.Name() == "lock" || !d.Type().IsRegular():
			return nil
		}
		return copyFile(p, to)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// machine describes where the run happened.
type machine struct {
	CPUs    int    `json:"nproc"`
	Model   string `json:"cpu_model"`
	Kernel  string `json:"kernel"`
	DataFS  string `json:"data_fs"`
	DataDir string `json:"data_dir"`
	TmpFS   string `json:"tmpfs"`
	// Load is the 1-minute load average at the start and at the end: how
	// busy the machine was with others' work.
	Load string `json:"load"`
}

// loadAvg is the 1-minute load average, from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for l := range bytes.SplitSeq(b, []byte("\n")) {
		if k, v, ok := bytes.Cut(l, []byte(":")); ok && strings.TrimSpace(string(k)) == "model name" {
			return strings.TrimSpace(string(v))
		}
	}
	return "?"
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// count formats a record count: 10k, 1M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}
