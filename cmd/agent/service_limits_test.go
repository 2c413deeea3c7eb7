package main

import (
	"strings"
	"testing"
)

// The unit bounds the service and its tasks together: TasksMax= and
// MemoryMax= with defaults, set by --tasks-max and --memory-max (systemd's
// units, ours, a share of RAM or infinity), for user and system units;
// launchd gets NumberOfProcesses and refuses a memory limit it cannot
// keep; a value the service manager would not take is refused at once.
func TestServiceLimits(t *testing.T) {
	serviceEnv(t)
	run := []string{"--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t)}
	for _, c := range []struct {
		name             string
		flags            []string
		tasks, memory    string
		launchdProcesses string // "" when the plist has none
	}{
		{"defaults", nil, "4096", "75%", "4096"},
		{"systemd units", []string{"--tasks-max", "512", "--memory-max", "8G"}, "512", "8G", "512"},
		{"binary units", []string{"--tasks-max=1024", "--memory-max=1536MiB"}, "1024", "1536M", "1024"},
		{"bytes", []string{"--memory-max", "1000000000"}, "4096", "1000000000", "4096"},
		{"share of RAM", []string{"--memory-max", "50%"}, "4096", "50%", "4096"},
		{"infinity", []string{"--tasks-max", "infinity", "--memory-max", "infinity"}, "infinity", "infinity", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, system := range [][]string{nil, {"--system", "--run-as", "root"}} {
				args := append(append(append([]string{"service", "print"}, system...), c.flags...), run...)
				r := runAgent(t, args...)
				v := unitValues(r.stdout)
				if r.code != 0 || strings.Join(v["TasksMax"], ",") != c.tasks || strings.Join(v["MemoryMax"], ",") != c.memory {
					t.Errorf("%q: TasksMax=%q MemoryMax=%q, want %s and %s: %+v", args, v["TasksMax"], v["MemoryMax"], c.tasks, c.memory, r)
				}
			}
			var mem []string
			for i := 0; i < len(c.flags); i++ { // launchd takes no --memory-max
				if f := c.flags[i]; f == "--memory-max" {
					i++
				} else if !strings.HasPrefix(f, "--memory-max=") {
					mem = append(mem, f)
				}
			}
			r := runAgent(t, append(append([]string{"service", "print", "--manager", "launchd"}, mem...), run...)...)
			p := parsePlist(t, r.stdout)
			for _, k := range []string{"SoftResourceLimits", "HardResourceLimits"} {
				got, _ := p[k].(map[string]any)
				if c.launchdProcesses == "" && p[k] != nil || c.launchdProcesses != "" && got["NumberOfProcesses"] != c.launchdProcesses {
					t.Errorf("plist %s = %#v, want NumberOfProcesses %q", k, p[k], c.launchdProcesses)
				}
			}
		})
	}
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"tasks zero", []string{"--tasks-max", "0"}, "--tasks-max"},
		{"tasks words", []string{"--tasks-max", "many"}, "--tasks-max"},
		{"memory unit", []string{"--memory-max", "8X"}, "--memory-max"},
		{"memory zero", []string{"--memory-max", "0"}, "--memory-max"},
		{"memory share", []string{"--memory-max", "150%"}, "--memory-max"},
		{"memory line break", []string{"--memory-max", "1G\nExecStartPre=/bin/sh"}, "--memory-max"},
		{"launchd memory", []string{"--manager", "launchd", "--memory-max", "8G"}, "launchd has no memory limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantOneLineError(t, runAgent(t, append(append([]string{"service", "print"}, c.flags...), run...)...), 2, c.want)
		})
	}
}
