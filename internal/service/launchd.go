package service

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// LaunchdPlist renders the launchd job. launchd has no environment file:
// the token comes from --token-file, the CLIs' keys from their own login.
func (s Spec) LaunchdPlist() string {
	var b strings.Builder
	key := func(k string) { fmt.Fprintf(&b, "  <key>%s</key>\n", plistText(k)) }
	str := func(indent, v string) { fmt.Fprintf(&b, "%s<string>%s</string>\n", indent, plistText(v)) }
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
`)
	key("Label")
	str("  ", s.Label())
	key("ProgramArguments")
	b.WriteString("  <array>\n")
	for _, a := range append([]string{s.Binary, "run"}, s.Args...) {
		str("    ", a)
	}
	b.WriteString("  </array>\n")
	if s.System && s.Account.Uid != "0" {
		key("UserName")
		str("  ", s.Account.Username)
	}
	key("EnvironmentVariables")
	b.WriteString("  <dict>\n    <key>PATH</key>\n")
	str("    ", s.Path)
	b.WriteString("  </dict>\n")
	key("RunAtLoad")
	b.WriteString("  <true/>\n")
	// Restarted when it exits non-zero or dies, not after a clean stop.
	key("KeepAlive")
	b.WriteString("  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n")
	// Standard, not Background: tasks are real work (builds, tests) that
	// Background's CPU and I/O throttling would slow down.
	key("ProcessType")
	str("  ", "Standard")
	// The time from SIGTERM to SIGKILL, as TimeoutStopSec for systemd.
	key("ExitTimeOut")
	fmt.Fprintf(&b, "  <integer>%d</integer>\n", int(s.Stop.Seconds()))
	// launchd's nearest to TasksMax=: RLIMIT_NPROC, which counts all the
	// user's processes (not threads, not the job's alone) and which macOS
	// caps at kern.maxprocperuid. It has no memory limit for a job: macOS
	// does not enforce RLIMIT_RSS.
	if tasks, _ := s.Limits.Tasks(); tasks != "infinity" {
		for _, k := range []string{"SoftResourceLimits", "HardResourceLimits"} {
			key(k)
			fmt.Fprintf(&b, "  <dict>\n    <key>NumberOfProcesses</key>\n    <integer>%s</integer>\n  </dict>\n", tasks)
		}
	}
	key("StandardOutPath")
	str("  ", s.LogFile())
	key("StandardErrorPath")
	str("  ", s.LogFile())
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

// plistText escapes text for the plist's XML.
func plistText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// plistProgramArguments reads ProgramArguments back from a plist.
func plistProgramArguments(text string) ([]string, error) {
	d := xml.NewDecoder(strings.NewReader(text))
	var args []string
	var lastKey string
	inArgs := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return args, nil
		}
		if err != nil {
			return nil, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			if ee, ok := tok.(xml.EndElement); ok && ee.Name.Local == "array" {
				inArgs = false
			}
			continue
		}
		switch se.Name.Local {
		case "key":
			var k string
			if err := d.DecodeElement(&k, &se); err != nil {
				return nil, err
			}
			lastKey = k
		case "array":
			inArgs = lastKey == "ProgramArguments"
		case "string":
			var v string
			if err := d.DecodeElement(&v, &se); err != nil {
				return nil, err
			}
			if inArgs {
				args = append(args, v)
			}
		}
	}
}

// launchctl domain and service of the target: gui/UID for a user's job,
// system for a daemon.
func (t Target) launchdDomain() string {
	if t.System {
		return "system"
	}
	return "gui/" + t.Account.Uid
}

func (t Target) launchdService() string { return t.launchdDomain() + "/" + t.Label() }

// launchdState reads `launchctl print`: "state = running", "pid = 123".
func launchdState(out string) (active string, pid int) {
	active = "unknown"
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), " = ")
		switch {
		case !ok:
		case k == "state" && active == "unknown":
			active = v
		case k == "pid" && pid == 0:
			pid, _ = strconv.Atoi(v)
		}
	}
	return active, pid
}
