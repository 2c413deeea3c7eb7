package service

import (
	"bytes"
	"context"
	"errors"
	iofs "io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/settings"
)

// answer makes the fake print text on each call.
func (f *fakeCtl) answer(t *testing.T, name, text string) {
	t.Helper()
	answer := filepath.Join(f.dir, "answer")
	writeFile(t, answer, text)
	script := "#!/bin/sh\necho \"$*\" >> '" + f.calls + "'\n" +
		"[ -f '" + f.fail + "' ] && cat '" + f.fail + "' >&2 && exit 1\ncat '" + answer + "'\nexit 0\n"
	must(t, os.WriteFile(filepath.Join(f.dir, name), []byte(script), 0o700))
}

// The manager's view of the service is read from systemctl show; a
// manager that cannot be asked is an error naming the call and what it
// said, in one line.
func TestState(t *testing.T) {
	ctl := newFakeCtl(t, "systemctl")
	tg := testTarget(t, Systemd, false)
	tg.Name = "b"
	ctl.answer(t, "systemctl", "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=2\nStatusText=running 1 task\n")
	st, err := tg.State(context.Background())
	if err != nil || st != (State{Active: "active (running)", PID: 4242, Status: "running 1 task", Restarts: "2"}) || !st.Running() {
		t.Errorf("State = %+v %v (running %v)", st, err, st.Running())
	}
	if got, want := ctl.took(t), "--user show agent-b.service --property=LoadState,ActiveState,SubState,MainPID,NRestarts,StatusText\n"; got != want {
		t.Errorf("calls %q, want %q", got, want)
	}
	ctl.answer(t, "systemctl", "ActiveState=failed\nSubState=failed\nMainPID=0\n")
	if st, err := tg.State(context.Background()); err != nil || st.Active != "failed (failed)" || st.Running() {
		t.Errorf("State of a failed unit = %+v %v", st, err)
	}
	writeFile(t, ctl.fail, "Failed to connect to bus:\nNo medium found\n")
	if _, err := tg.State(context.Background()); err == nil || !strings.HasSuffix(err.Error(), "--property=LoadState,ActiveState,SubState,MainPID,NRestarts,StatusText: Failed to connect to bus: No medium found") {
		t.Errorf("State without a manager: %v", err)
	}
}

// start, stop, restart and logs are one call each of the manager (the
// journal, the log file); a tool not on PATH is said so.
func TestControlCalls(t *testing.T) {
	ctl := newFakeCtl(t, "systemctl")
	journal := newFakeCtl(t, "journalctl")
	ctx := context.Background()
	for _, system := range []bool{false, true} {
		tg := testTarget(t, Systemd, system)
		user := map[bool]string{false: "--user "}[system]
		var out bytes.Buffer
		must(t, tg.Start(ctx, &out))
		must(t, tg.Stop(ctx, &out))
		must(t, tg.Restart(ctx, &out))
		if got, want := ctl.took(t), user+"start agent.service\n"+user+"stop agent.service\n"+user+"restart agent.service\n"; got != want {
			t.Errorf("system %v: calls\n%s\nwant\n%s", system, got, want)
		}
		if !strings.HasPrefix(out.String(), "running: systemctl "+user+"start agent.service\n") {
			t.Errorf("the calls are not said: %q", out.String())
		}
		must(t, tg.Logs(ctx, true, &out, &out))
		must(t, tg.Logs(ctx, false, &out, &out))
		if got, want := journal.took(t), user+"-u agent.service -n 100 -f\n"+user+"-u agent.service -n 100\n"; got != want {
			t.Errorf("system %v: journalctl calls\n%s\nwant\n%s", system, got, want)
		}
		if want := "agent service logs" + map[bool]string{true: " --system"}[system] + " (journalctl " + user + "-u agent.service -n 100 -f)"; tg.LogsHint() != want {
			t.Errorf("LogsHint %q, want %q", tg.LogsHint(), want)
		}
	}
	t.Setenv("PATH", t.TempDir())
	tg := testTarget(t, Systemd, false)
	if err := tg.Start(ctx, &bytes.Buffer{}); err == nil || err.Error() != "systemctl --user start agent.service: systemctl is not on PATH; is system this system's service manager? (--no-start prints the commands instead)" {
		t.Errorf("systemctl not on PATH: %v", err)
	}
	launchd := testTarget(t, Launchd, false)
	if err := launchd.CanRunCtl(); (err == nil) != (runtime.GOOS == "darwin") {
		t.Errorf("CanRunCtl for launchd on %s: %v", runtime.GOOS, err)
	}
	if got, want := launchd.logsCall(true).String(), "tail -n 100 -f "+launchd.LogFile(); got != want {
		t.Errorf("launchd logs: %q, want %q", got, want)
	}
}

// The services on this machine are the caller's user units and the
// system's units that run as it (all of them, for root), named ones after
// the unnamed; units install did not write are not among them.
func TestServicesOnMachine(t *testing.T) {
	me, err := user.Current()
	must(t, err)
	dir := t.TempDir()
	defer func(d string) { SystemUnitDir = d }(SystemUnitDir)
	SystemUnitDir = dir
	caller := testTarget(t, Systemd, false)
	unit := func(file, runAs, data string) {
		writeFile(t, file, "[Service]\nExecStart=/usr/local/bin/agent run --control-plane https://x --data-dir "+data+"\nUser="+runAs+"\n")
	}
	unit(filepath.Join(dir, "agent.service"), "someone-else-entirely", "/var/lib/agent")
	unit(filepath.Join(dir, "agent-mine.service"), me.Username, "/srv/mine")
	unit(filepath.Join(dir, "other.service"), me.Username, "/srv/other") // not one install wrote
	userUnits := filepath.Join(caller.ConfigHome, "systemd", "user")
	unit(filepath.Join(userUnits, "agent-b.service"), "", "/home/b")
	unit(filepath.Join(userUnits, "agent.service"), "", "/home/a")
	writeFile(t, filepath.Join(userUnits, "agent-none.service"), "[Service]\nExecStart=/usr/local/bin/agent run\n")

	want := []OnMachine{
		{filepath.Join(userUnits, "agent.service"), "", "/home/a"},
		{filepath.Join(userUnits, "agent-b.service"), "b", "/home/b"},
		{filepath.Join(dir, "agent-mine.service"), "mine", "/srv/mine"},
	}
	if me.Uid == "0" {
		want = []OnMachine{want[0], {filepath.Join(dir, "agent.service"), "", "/var/lib/agent"}, want[1], want[2]}
	}
	got := ServicesOnMachine(caller)
	if len(got) != len(want) {
		t.Fatalf("services on this machine for %s\n got %+v\nwant %+v", me.Username, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("service %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := ReadInstalled(testTarget(t, Systemd, false)); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("ReadInstalled of nothing: %v, want ErrNotExist", err)
	}
}

// Status says whether the service is installed, what its manager and the
// agent say and what its data directory holds, and its exit code says
// which: 4 not installed, 0 running, 3 stopped, 1 when the manager cannot
// be asked (the local lines shown all the same).
func TestWriteStatus(t *testing.T) {
	ctl := newFakeCtl(t, "systemctl")
	tg := testTarget(t, Systemd, false)
	local := func(dataDir string) (string, string) { return "tasks of " + dataDir, "outbox of " + dataDir }
	status := func() (int, string) {
		t.Helper()
		var out bytes.Buffer
		code, err := WriteStatus(context.Background(), &out, tg, local)
		must(t, err)
		return code, out.String()
	}
	if code, out := status(); code != StatusNotInstalled || out != "service:  not installed (no "+tg.File()+")\n" {
		t.Errorf("not installed: %d %q", code, out)
	}
	writeFile(t, tg.File(), "[Service]\nExecStart=/usr/local/bin/agent run --data-dir /srv/agent\n")
	ctl.answer(t, "systemctl", "ActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=1\nStatusText=running 1 task\n")
	code, out := status()
	for _, want := range []string{"state:           active (running)\n", "main pid:        4242\n", "agent says:      running 1 task\n", "restarts:        1\n",
		"data directory:  /srv/agent\n", "tasks:           tasks of /srv/agent\n", "outbox:          outbox of /srv/agent\n", "logs:            agent service logs"} {
		if code != StatusRunning || !strings.Contains(out, want) {
			t.Errorf("running: %d, want %q in\n%s", code, want, out)
		}
	}
	ctl.answer(t, "systemctl", "ActiveState=inactive\nSubState=dead\nMainPID=0\n")
	if code, out := status(); code != StatusStopped || strings.Contains(out, "main pid") {
		t.Errorf("stopped: %d\n%s", code, out)
	}
	writeFile(t, ctl.fail, "Failed to connect to bus\n")
	if code, out := status(); code != StatusUnknown || !strings.Contains(out, "state:           unknown: systemctl") || !strings.Contains(out, "tasks:           tasks of /srv/agent") {
		t.Errorf("manager out of reach: %d\n%s", code, out)
	}
}

// A command that reads a data directory follows the first service on
// this machine, and names the others it could have meant: the other
// services' directories, and the default one when it holds data and no
// service runs on it.
func TestFollowedDataDir(t *testing.T) {
	dir := t.TempDir()
	defer func(d string) { SystemUnitDir = d }(SystemUnitDir)
	SystemUnitDir = dir
	caller := testTarget(t, Systemd, false)
	if _, ok := FollowedDataDir(caller, t.TempDir()); ok {
		t.Error("a data directory followed with no service installed")
	}
	userUnits := filepath.Join(caller.ConfigHome, "systemd", "user")
	writeFile(t, filepath.Join(userUnits, "agent.service"), "[Service]\nExecStart=/usr/local/bin/agent run --data-dir /home/a\n")
	def := t.TempDir()
	f, ok := FollowedDataDir(caller, def)
	if !ok || f.DataDir != "/home/a" || len(f.Others) != 1 || f.Note() != "agent: reading /home/a, the data directory of "+filepath.Join(userUnits, "agent.service")+
		"; also here: "+def+" (the default, which agent run uses outside the service); --data-dir says which" {
		t.Errorf("one service and a default directory with data: %+v %q", f, f.Note())
	}
	writeFile(t, filepath.Join(userUnits, "agent-b.service"), "[Service]\nExecStart=/usr/local/bin/agent run --data-dir /home/b\n")
	if f, _ := FollowedDataDir(caller, filepath.Join(def, "none")); f.DataDir != "/home/a" || strings.Join(f.Others, ";") != "/home/b (agent-b.service)" {
		t.Errorf("two services: %+v", f)
	}
	if f, _ := FollowedDataDir(caller, "/home/a"); len(f.Others) != 1 || f.Note() == "" {
		t.Errorf("the default directory is a service's: %+v", f)
	}

	// As a command sees it: only a data directory left at its default
	// follows, and the reader hears which it read.
	var set string
	setDir := func(d string) error { set = d; return nil }
	callerOf := func() (Target, error) { return caller, nil }
	var note strings.Builder
	r := &settings.Resolved{Origins: map[string]settings.Origin{"data-dir": {Kind: settings.FromFlag, Where: "--data-dir"}}}
	if err := FollowDataDir(r, callerOf, def, setDir, &note); err != nil || set != "" || note.Len() != 0 {
		t.Errorf("a data directory given followed the service: %v %q %q", err, set, note.String())
	}
	r.Origins["data-dir"] = settings.Origin{Kind: settings.FromDefault}
	if err := FollowDataDir(r, callerOf, def, setDir, &note); err != nil || set != "/home/a" || r.Origins["data-dir"] != (settings.Origin{Kind: FromService, Where: filepath.Join(userUnits, "agent.service")}) ||
		!strings.HasPrefix(note.String(), "agent: reading /home/a, the data directory of ") {
		t.Errorf("a default data directory: %v %q %+v %q", err, set, r.Origins["data-dir"], note.String())
	}
}

// A service's secrets are its data directory and the token file its unit
// names, in either form of the flag.
func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "agent.service"), filepath.Join(dir, "agent-b.service")
	writeFile(t, a, "[Service]\nExecStart=/usr/local/bin/agent run --token-file /etc/agent/token --data-dir /srv/a\n")
	writeFile(t, b, "[Service]\nExecStart=/usr/local/bin/agent run --token-file=/etc/agent/b-token --data-dir /srv/b\n")
	got := Secrets(Systemd, []OnMachine{{File: a, DataDir: "/srv/a"}, {File: b, Name: "b", DataDir: "/srv/b"}, {File: filepath.Join(dir, "gone.service"), DataDir: "/srv/gone"}})
	if want := "/srv/a /etc/agent/token /srv/b /etc/agent/b-token /srv/gone"; strings.Join(got, " ") != want {
		t.Errorf("secrets %q, want %q", strings.Join(got, " "), want)
	}
}
