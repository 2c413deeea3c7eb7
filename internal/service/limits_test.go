package service

import (
	"errors"
	"strings"
	"testing"
)

// Limits take systemd's units, ours, a share of RAM or infinity, and
// refuse what systemd would not take, and a memory limit for launchd,
// which cannot keep one.
func TestLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tasksMax, memoryMax string
		tasks, memory       string
	}{
		{"", "", "4096", "75%"},
		{"512", "8G", "512", "8G"},
		{" 1024 ", "1536MiB", "1024", "1536M"},
		{"4096", "1000000000", "4096", "1000000000"},
		{"4096", "2TiB", "4096", "2T"},
		{"4096", "3GB", "4096", "3000000000"},
		{"4096", "50%", "4096", "50%"},
		{"infinity", "infinity", "infinity", "infinity"},
	} {
		l := Limits{TasksMax: c.tasksMax, MemoryMax: c.memoryMax}
		tasks, terr := l.Tasks()
		memory, merr := l.Memory()
		if terr != nil || merr != nil || tasks != c.tasks || memory != c.memory || l.Check(Systemd) != nil {
			t.Errorf("%q %q: TasksMax=%q (%v) MemoryMax=%q (%v), want %s and %s", c.tasksMax, c.memoryMax, tasks, terr, memory, merr, c.tasks, c.memory)
		}
	}
	for _, c := range []struct {
		l    Limits
		m    Manager
		want string
	}{
		{Limits{TasksMax: "0"}, Systemd, `--tasks-max "0": want a count`},
		{Limits{TasksMax: "many"}, Systemd, `--tasks-max "many"`},
		{Limits{TasksMax: "-1"}, Systemd, `--tasks-max "-1"`},
		{Limits{MemoryMax: "8X"}, Systemd, `--memory-max "8X": want bytes`},
		{Limits{MemoryMax: "0"}, Systemd, `--memory-max "0"`},
		{Limits{MemoryMax: "150%"}, Systemd, `--memory-max "150%": want a share of RAM from 1% to 100%`},
		{Limits{MemoryMax: "0%"}, Systemd, `--memory-max "0%"`},
		{Limits{MemoryMax: "1G\nExecStartPre=/bin/sh"}, Systemd, `--memory-max "1G\nExecStartPre=/bin/sh"`},
		{Limits{MemoryMax: "8G", MemorySet: true}, Launchd, "launchd has no memory limit"},
	} {
		err := c.l.Check(c.m)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v for %s: %v, want a usage error saying %s", c.l, c.m, err, c.want)
		}
	}
	if err := (Limits{MemorySet: true}).Check(Systemd); err != nil {
		t.Errorf("--memory-max for systemd: %v", err)
	}
}
