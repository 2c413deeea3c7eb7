package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
)

// The mark reaches the executor, and a sweep by owner ends what a crashed
// agent's attempts left behind.
func TestSweepOwnerEndsMarkedProcesses(t *testing.T) {
	cmd := exec.Command("setsid", "sleep", "300")
	cmd.Env = append(os.Environ(), MarkEnv+"=owner-x/att-1/abcd")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done }) // a failed run leaves nothing behind
	other := exec.Command("sleep", "300")
	other.Env = append(os.Environ(), MarkEnv+"=owner-y/att-2/abcd")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()

	if n := SweepOwner("owner-x"); n != 1 {
		t.Fatalf("SweepOwner killed %d processes, want 1", n)
	}
	<-done // killed, else this blocks until the test times out
	if !alive(other.Process.Pid) {
		t.Fatal("another owner's process was killed")
	}
}

// A process started with no environment at all reads like one caught in an
// exec; the sweep looks at it a few times, leaves it alone and returns.
func TestSweepLeavesAProcessWithNoEnvironment(t *testing.T) {
	bare := exec.Command("sleep", "300")
	bare.Env = []string{}
	if err := bare.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bare.Process.Kill(); _ = bare.Wait() }()
	// Wait for its exec to be done: its command line is sleep's.
	testkit.WaitFor(t, "its exec of sleep", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(bare.Process.Pid) + "/cmdline")
		return strings.HasPrefix(string(b), "sleep\x00")
	})
	if n := SweepOwner("owner-z"); n != 0 {
		t.Fatalf("SweepOwner killed %d processes, want 0", n)
	}
	if !alive(bare.Process.Pid) {
		t.Fatal("a process with no environment was killed")
	}
}

// A previous life's keeper is told to end its attempt, not killed
// outright: it kills what dropped the mark too, which a SIGKILLed keeper
// would have left to init.
func TestSweepOwnerEndsAKeepersAttemptWhole(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "escaped")
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Dir: dir, Mark: NewMark("owner-k", "att-1"), Grace: time.Second,
		Args: []string{"-c", `env -u ` + MarkEnv + ` setsid sh -c 'echo $$ > escaped; exec sleep 300' </dev/null >/dev/null 2>&1 &
			while :; do sleep 1; done`}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Drain(time.Second)
	testkit.WaitFor(t, "the escaped process's pid", func() bool { b, _ := os.ReadFile(pidFile); return len(b) > 0 })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	escaped, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	SweepOwner("owner-k")
	<-p.Exited()
	if alive(escaped) {
		_ = syscall.Kill(escaped, syscall.SIGKILL)
		t.Fatalf("process %d, which dropped the mark, outlived the sweep of its keeper's owner", escaped)
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != 'Z'
}

// A daemon that came to the subreaper agent and is its own (the tmux
// view's server) is spared by the sweep that kills an attempt's orphans;
// another orphan is not. Run in a child of the test, which becomes the
// subreaper.
func TestOrphanSweepSparesTheAgentsOwnDaemon(t *testing.T) {
	if os.Getenv("PROC_TEST_SPARE") == "1" {
		spareAsSubreaper(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanSweepSparesTheAgentsOwnDaemon$")
	cmd.Env = append(os.Environ(), "PROC_TEST_SPARE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the subreaper child: %v\n%s", err, out)
	}
}

func spareAsSubreaper(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Skip("no subreaper:", err)
	}
	// In a group of their own, as Start puts an attempt.
	sh := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!; sleep 300 >/dev/null 2>&1 & echo $!")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	own, orphan := pids[0], pids[1]
	defer func() { _ = syscall.Kill(own, syscall.SIGKILL); waitGone(own) }()
	defer func() { _ = syscall.Kill(orphan, syscall.SIGKILL); waitGone(orphan) }()
	Spare(own)
	for _, pid := range pids {
		testkit.WaitFor(t, fmt.Sprintf("process %d to come to the subreaper", pid), func() bool {
			ppid, _, _ := procStat(pid)
			return ppid == os.Getpid()
		})
	}
	if n := killOrphans(); n != 1 {
		t.Errorf("killOrphans killed %d processes, want 1", n)
	}
	if !alive(own) {
		t.Error("the spared daemon was killed")
	}
	if alive(orphan) {
		t.Error("the orphan lives")
	}
}

// The commands the agent runs itself (git, through os/exec, in the
// agent's process group) are not an attempt's orphans: a sweep neither
// kills one that runs nor reaps one that exited before its Wait, whose
// Wait would fail ("waitid: no child processes"). A process of an
// attempt that moved into the agent's group is still killed. Run in a
// child of the test, which becomes the subreaper.
func TestOrphanSweepLeavesTheAgentsOwnCommands(t *testing.T) {
	if os.Getenv("PROC_TEST_OWN") == "1" {
		ownCommandsAsSubreaper(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanSweepLeavesTheAgentsOwnCommands$")
	cmd.Env = append(os.Environ(), "PROC_TEST_OWN=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the subreaper child: %v\n%s", err, out)
	}
}

func ownCommandsAsSubreaper(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Skip("no subreaper:", err)
	}
	running := exec.Command("sleep", "300")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Process.Kill(); _ = running.Wait() }()
	exited := exec.Command("true")
	if err := exited.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the exited command to be a zombie", func() bool {
		_, state, _ := procStat(exited.Process.Pid)
		return state == 'Z'
	})
	// An attempt's process that moved into the agent's group still
	// carries its no_new_privs (Landlock's): it is an orphan all the same.
	sh := exec.Command("sh", "-c", "setpriv --no-new-privs sleep 300 >/dev/null 2>&1 & echo $!")
	out, err := sh.Output()
	if err != nil {
		t.Skip("no setpriv:", err)
	}
	moved, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(moved, syscall.SIGKILL); waitGone(moved) }()
	testkit.WaitFor(t, "the moved process to come to the subreaper with no_new_privs", func() bool {
		ppid, _, _ := procStat(moved)
		return ppid == os.Getpid() && noNewPrivs(moved)
	})
	if n := killOrphans(); n != 1 {
		t.Errorf("killOrphans killed %d processes, want the one from an attempt", n)
	}
	if alive(moved) {
		t.Error("the attempt's process in the agent's group lives")
	}
	reapOrphans()
	if err := exited.Wait(); err != nil {
		t.Errorf("the exited command's Wait after a sweep: %v", err)
	}
	if !alive(running.Process.Pid) {
		t.Error("the running command was killed")
	}
}
