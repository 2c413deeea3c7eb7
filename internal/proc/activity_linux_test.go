package proc

import (
	"github.com/edgeagent/agent/internal/testkit"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// busy starts a shell that spins, carrying mark (none when empty), and
// ends it when the test does.
func busy(t *testing.T, mark string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	cmd.Env = os.Environ()
	if mark != "" {
		cmd.Env = append(cmd.Env, MarkEnv+"="+mark)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// A marked process that spins shows in its attempt's activity, growing;
// stopped (SIGSTOP), it is counted stopped, and its CPU time no longer
// grows while another process's does; another mark's processes are not
// counted.
func TestMarkActivityTellsBusyFromStopped(t *testing.T) {
	const mark = "owner-act/att-1/abcd"
	cmd := busy(t, mark)
	busy(t, "owner-act/att-2/abcd")
	first := MarkActivity(mark)
	if first.Processes != 1 || first.Stopped != 0 {
		t.Fatalf("activity %+v, want one running process", first)
	}
	testkit.WaitFor(t, "the busy process's activity to grow", func() bool { return MarkActivity(mark).Busier(first) })

	must(t, cmd.Process.Signal(syscall.SIGSTOP))
	testkit.WaitFor(t, "the stopped process to count stopped", func() bool { return MarkActivity(mark).Stopped == 1 })
	stopped := MarkActivity(mark)
	// Time passes, as another spinning process's CPU time says.
	ref := busy(t, "")
	refTicks := func() uint64 { n, _, _ := cpuOf(ref.Process.Pid); return n }
	start := refTicks()
	testkit.WaitFor(t, "the other process's CPU time to grow", func() bool { return refTicks() > start+2 })
	if now := MarkActivity(mark); now.Busier(stopped) || now.Stopped != 1 {
		t.Errorf("a stopped process: %+v after %+v, want no more work", now, stopped)
	}
	if none := MarkActivity("owner-act/none/abcd"); none != (Activity{}) {
		t.Errorf("a mark nobody carries: %+v", none)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
