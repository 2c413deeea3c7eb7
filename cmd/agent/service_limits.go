package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// serviceLimits bound what the service and every task it runs may take
// together, so that a fork bomb or a runaway build hits the service's
// limit, not the workstation: systemd's TasksMax= and MemoryMax= on the
// unit's control group. The zero value is the defaults.
type serviceLimits struct {
	tasksMax  string // a count of processes and threads, or "infinity"
	memoryMax string // bytes (8GiB, 8G), a share of RAM (75%), or "infinity"
	// memorySet: --memory-max was given, which launchd cannot honour.
	memorySet bool
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
	defaultTasksMax  = "4096"
	defaultMemoryMax = "75%"
)

func (l *serviceLimits) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&l.tasksMax, "tasks-max", defaultTasksMax, "the most processes and threads the service and its tasks may run together (TasksMax=; launchd: NumberOfProcesses), or infinity")
	cmd.Flags().StringVar(&l.memoryMax, "memory-max", defaultMemoryMax, "the most memory the service and its tasks may use together (MemoryMax=): bytes (8GiB, 8G), a share of RAM (75%), or infinity; systemd only")
}

// check refuses limits the service manager would not take.
func (l serviceLimits) check(m serviceManager) error {
	if _, err := l.tasks(); err != nil {
		return err
	}
	if _, err := l.memory(); err != nil {
		return err
	}
	if m == launchd && l.memorySet {
		return usagef("--memory-max: launchd has no memory limit for a job (macOS does not enforce a resident-size limit); leave it out for launchd")
	}
	return nil
}

// tasks is TasksMax='s value: a count, or "infinity".
func (l serviceLimits) tasks() (string, error) {
	v := strings.TrimSpace(l.tasksMax)
	if v == "" {
		v = defaultTasksMax
	}
	if v == "infinity" {
		return v, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == 0 {
		return "", usagef("--tasks-max %q: want a count of processes and threads above 0, or infinity", l.tasksMax)
	}
	return strconv.FormatUint(n, 10), nil
}

// memory is MemoryMax='s value: bytes in systemd's units (K, M, G, T:
// powers of 1024), a percentage of RAM, or "infinity".
func (l serviceLimits) memory() (string, error) {
	v := strings.TrimSpace(l.memoryMax)
	if v == "" {
		v = defaultMemoryMax
	}
	if v == "infinity" {
		return v, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || n == 0 || n > 100 {
			return "", usagef("--memory-max %q: want a share of RAM from 1%% to 100%%", l.memoryMax)
		}
		return strconv.FormatUint(n, 10) + "%", nil
	}
	// systemd's own single letters (8G) are powers of 1024, as KiB...
	if i := len(v) - 1; i > 0 && strings.ContainsRune("KMGT", rune(v[i])) && v[i-1] >= '0' && v[i-1] <= '9' {
		v += "iB"
	}
	b, err := parseSize(v)
	if err != nil || b <= 0 {
		return "", usagef("--memory-max %q: want bytes (8GiB, 8G, 8589934592), a share of RAM (75%%), or infinity", l.memoryMax)
	}
	for _, u := range []struct {
		suffix string
		n      byteSize
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b%u.n == 0 {
			return fmt.Sprint(int64(b/u.n)) + u.suffix, nil
		}
	}
	return fmt.Sprint(int64(b)), nil
}
