package service

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SystemdUnit renders the systemd unit.
func (s Spec) SystemdUnit() string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	words := []string{systemdQuote(s.Binary), "run"}
	for _, a := range s.Args {
		words = append(words, systemdQuote(a))
	}
	line("# Written by `agent service install`; `agent service uninstall` removes it.")
	line("[Unit]")
	line("Description=Edge agent: runs control plane tasks on this machine")
	if s.System {
		// A user manager cannot order itself after the system's targets.
		line("Wants=network-online.target")
		line("After=network-online.target")
	}
	line("")
	line("[Service]")
	// The agent says READY=1 once started, STOPPING=1 and STATUS= lines,
	// and pings the watchdog at half WatchdogSec while its loops are alive.
	line("Type=notify")
	line("WatchdogSec=%s", systemdSeconds(watchdogTimeout))
	line("ExecStart=%s", strings.Join(words, " "))
	if s.System {
		line("User=%s", systemdValue(s.Account.Username))
		if s.DataDir == filepath.Join("/var/lib", s.stateDirectory()) {
			line("StateDirectory=%s", s.stateDirectory())
			line("StateDirectoryMode=0700")
		}
	}
	line("Environment=%s", systemdValue("PATH="+s.Path))
	// Secrets (AGENT_TOKEN, API keys) live in this 0600 file, never in the
	// unit; "-": a missing file is no error.
	line("EnvironmentFile=%s", systemdValue("-"+s.EnvFile()))
	line("# Restart after a crash or a watchdog timeout, but not after exit 2:")
	line("# a usage or config error, which a restart would only repeat.")
	line("Restart=on-failure")
	line("RestartSec=5s")
	line("RestartPreventExitStatus=2")
	line("# Stopping: the drain (--drain-timeout), each running attempt's stop")
	line("# steps (%d x --kill-grace), the outbox flush (%s), the offline heartbeat", stopSteps, stopFlush)
	line("# (%s) and a margin of %s.", stopLastBeat, stopMargin)
	line("TimeoutStopSec=%s", systemdSeconds(s.Stop))
	if ReattachOff(s.Args) {
		line("# SIGTERM to the agent alone: it stops its executors' process groups")
		line("# itself, gracefully; whatever is left at the timeout gets SIGKILL.")
		line("KillMode=mixed")
	} else {
		// mixed would SIGKILL the keepers once the agent is gone, cutting
		// every turn at each restart and upgrade.
		line("# SIGTERM to the agent alone, and no other process killed: running")
		line("# attempts go on under their keepers for --reattach-grace, and the next")
		line("# start (a restart, an upgrade, a crash's) re-attaches to them; a keeper")
		line("# whose agent does not come back ends its attempt itself at the grace.")
		line("KillMode=process")
	}
	// Checked when the flags were read; the zero value is the defaults.
	tasks, _ := s.Limits.Tasks()
	memory, _ := s.Limits.Memory()
	line("# The service and every task it runs, together: a fork bomb or a runaway")
	line("# build meets these, not the machine (--tasks-max, --memory-max).")
	line("TasksMax=%s", tasks)
	line("MemoryMax=%s", memory)
	if s.Sandbox {
		b.WriteString(s.systemdSandbox())
	}
	line("")
	line("[Install]")
	if s.System {
		line("WantedBy=multi-user.target")
	} else {
		line("WantedBy=default.target")
	}
	return b.String()
}

// systemdSandbox is the unit's hardening. The executors run AI coding
// CLIs that run arbitrary developer tools, so it confines the system, not
// the work: the OS is read-only, the home directory (the CLIs' ~/.codex,
// ~/.claude, tool caches), the data and work directories stay writable,
// and the network is open (the model API). Left out on purpose, each for
// an executor: MemoryDenyWriteExecute (node's and bun's JIT),
// RestrictNamespaces and the @mount/@privileged system calls (Codex's
// bubblewrap sandbox makes user, mount, pid and net namespaces), PrivateUsers
// and PrivateNetwork, IPAddressDeny. NoNewPrivileges and an empty
// capability bounding set are kept: bubblewrap works without privileges
// through user namespaces (Codex's bundled bwrap does, also under
// no_new_privs); only a setuid-root bwrap, used where unprivileged user
// namespaces are off, would fail. systemd-analyze security scores this
// 2.8 for a user unit and a root system unit.
func (s Spec) systemdSandbox() string {
	home := s.Account.HomeDir
	writable := []string{home}
	for _, d := range slices.Concat([]string{s.DataDir, s.WorkDir}, s.Repos, s.Files["isolation-write"]) {
		if d != "" && !within(d, home) && !withinAny(writable, d) {
			writable = append(writable, d)
		}
	}
	rw := make([]string, len(writable))
	for i, d := range writable {
		rw[i] = systemdValue("-" + d) // "-": one that does not exist yet is no error
	}
	return `# Sandbox (agent service install --no-sandbox leaves it out; see docs/service.md).
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
ReadWritePaths=` + strings.Join(rw, " ") + `
PrivateTmp=yes
PrivateMounts=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RestrictNamespaces=~cgroup
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
SystemCallFilter=~@clock @cpu-emulation @debug @module @obsolete @raw-io @reboot @swap
SystemCallErrorNumber=EPERM
CapabilityBoundingSet=
UMask=0077
KeyringMode=private
RemoveIPC=yes
`
}

// privateTmp are the directories a sandboxed unit sees empty
// (PrivateTmp=yes): files there are out of the service's reach.
var privateTmp = []string{"/tmp", "/var/tmp"}

// Unreachable says, a line each, which paths the service needs that its
// sandbox hides (a private /tmp), and what the unit made writable beyond
// the home directory for it: install and print say both.
func (s Spec) Unreachable() (hidden, opened []string) {
	if !s.Sandbox || s.Manager != Systemd {
		return nil, nil
	}
	need := map[string][]string{"data-dir": {s.DataDir}, "work-dir": {s.WorkDir}, "repo": s.Repos}
	for k, v := range s.Files {
		need[k] = v
	}
	names := make([]string, 0, len(need))
	for k := range need {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, p := range need[name] {
			switch {
			case p == "":
			case withinAny(privateTmp, p):
				hidden = append(hidden, fmt.Sprintf("--%s %s: the service has a private /tmp and /var/tmp (PrivateTmp=yes) and will not see it; move it out of /tmp, or install with --no-sandbox", name, p))
			case (name == "repo" || name == "isolation-write") && !within(p, s.Account.HomeDir):
				opened = append(opened, fmt.Sprintf("--%s %s is outside %s: the unit makes it writable (ReadWritePaths=)", name, p, s.Account.HomeDir))
			}
		}
	}
	return hidden, opened
}

// within tells whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func withinAny(dirs []string, path string) bool {
	for _, d := range dirs {
		if within(path, d) {
			return true
		}
	}
	return false
}

func systemdSeconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
}

// systemdQuote quotes a word of ExecStart when it needs it: $ would expand
// a variable and % a specifier.
func systemdQuote(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\"'\\$%;") {
		return w
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(w) + `"`
}

// systemdValue quotes the value of a setting such as Environment= or
// ReadWritePaths=, which expand specifiers (%) but not variables.
func systemdValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\"'\\%") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `%`, `%%`)
	return `"` + r.Replace(v) + `"`
}

// systemdWords splits an ExecStart= value written by systemdQuote back into
// its words.
func systemdWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
		case quoted && c == '"':
			quoted = false
		case (c == '$' || c == '%') && i+1 < len(s) && s[i+1] == c:
			i++
			w.WriteByte(c)
		case !quoted && c == '"':
			quoted, inWord = true, true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// systemctl is the command line of systemctl for the target's manager.
func (t Target) systemctl(args ...string) ctlCall {
	if t.System {
		return append(ctlCall{"systemctl"}, args...)
	}
	return append(ctlCall{"systemctl", "--user"}, args...)
}
