package service

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/internal/bytesize"
)

// Limits bound what the service and every task it runs may take
// together, so that a fork bomb or a runaway build hits the service's
// limit, not the workstation: systemd's TasksMax= and MemoryMax= on the
// unit's control group. The zero value is the defaults.
type Limits struct {
	TasksMax  string // a count of processes and threads, or "infinity"
	MemoryMax string // bytes (8GiB, 8G), a share of RAM (75%), or "infinity"
	// MemorySet: --memory-max was given, which launchd cannot honour.
	MemorySet bool
}

// The defaults, for a workstation that runs AI coding CLIs and the
// builds and tests they start. TasksMax counts threads as well as
// processes: the agent and a CLI take a few dozen, a parallel build
// (make -j, cargo, go test ./..., a JVM) a few hundred on a large
// machine; 4096 leaves that room several times over, per running task,
// and stops a fork bomb far below the kernel's pid limit. MemoryMax as a
// share of RAM fits a laptop and a large workstation alike: the tasks'
// builds may use most of it, and at 75% the kernel's OOM killer ends a
// process in the service, not the person's desktop, editor or browser.
const (
	DefaultTasksMax  = "4096"
	DefaultMemoryMax = "75%"
)

// Check refuses limits the service manager m would not take.
func (l Limits) Check(m Manager) error {
	if _, err := l.Tasks(); err != nil {
		return err
	}
	if _, err := l.Memory(); err != nil {
		return err
	}
	if m == Launchd && l.MemorySet {
		return usagef("--memory-max: launchd has no memory limit for a job (macOS does not enforce a resident-size limit); leave it out for launchd")
	}
	return nil
}

// Tasks is TasksMax='s value: a count, or "infinity".
func (l Limits) Tasks() (string, error) {
	v := strings.TrimSpace(l.TasksMax)
	if v == "" {
		v = DefaultTasksMax
	}
	if v == "infinity" {
		return v, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == 0 {
		return "", usagef("--tasks-max %q: want a count of processes and threads above 0, or infinity", l.TasksMax)
	}
	return strconv.FormatUint(n, 10), nil
}

// Memory is MemoryMax='s value: bytes in systemd's units (K, M, G, T:
// powers of 1024), a percentage of RAM, or "infinity".
func (l Limits) Memory() (string, error) {
	v := strings.TrimSpace(l.MemoryMax)
	if v == "" {
		v = DefaultMemoryMax
	}
	if v == "infinity" {
		return v, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || n == 0 || n > 100 {
			return "", usagef("--memory-max %q: want a share of RAM from 1%% to 100%%", l.MemoryMax)
		}
		return strconv.FormatUint(n, 10) + "%", nil
	}
	// systemd's own single letters (8G) are powers of 1024, as KiB...
	if i := len(v) - 1; i > 0 && strings.ContainsRune("KMGT", rune(v[i])) && v[i-1] >= '0' && v[i-1] <= '9' {
		v += "iB"
	}
	b, err := bytesize.Parse(v)
	if err != nil || b <= 0 {
		return "", usagef("--memory-max %q: want bytes (8GiB, 8G, 8589934592), a share of RAM (75%%), or infinity", l.MemoryMax)
	}
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b%u.n == 0 {
			return fmt.Sprint(b/u.n) + u.suffix, nil
		}
	}
	return fmt.Sprint(b), nil
}
