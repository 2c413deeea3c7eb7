//go:build faults

package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// The control plane killed with SIGKILL at each crash point of its store
// (AGENT_CP_CRASH=POINT:N stops it there during its Nth events batch, in a
// build with -tags faults), then restarted on the same directory: nothing it accepted is lost, nothing
// the agent sent ends dead, and the task ends as it would have.
func TestE2EControlPlaneCrashAtEachStorePoint(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"mid-events", "after-events", "after-save"} {
		for _, batch := range []string{"2", "complete"} {
			t.Run(point+":"+batch, func(t *testing.T) {
				addr, cpDir, dataDir := freeAddr(t), t.TempDir(), t.TempDir()
				c := startCPEnv(t, []string{"AGENT_CP_CRASH=" + point + ":" + batch}, addr, cpDir)
				startAgentProc(t, c, dataDir)
				id := submit(t, c, "@progress 4\n@sleep 300ms\n@output half way\n@progress 2\n@output done")
				c.wait() // it dies at its crash point
				if code := c.cmd.ProcessState.ExitCode(); code != -1 {
					t.Fatalf("the control plane exited %d, not by its crash point:\n%s", code, tail(c.output(), 2000))
				}
				c = startCP(t, addr, cpDir)
				v := c.waitDone(t, id)
				if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
					t.Fatalf("after the crash: %s (%s), %d attempts", v.Phase, v.PhaseReason, len(v.Attempts))
				}
				testkit.WaitFor(t, "the outbox to drain", func() bool {
					s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
					return err == nil && s.Stats.Pending == 0
				})
				snap, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
				if err != nil {
					t.Fatal(err)
				}
				if snap.Stats.Dead != 0 {
					for _, it := range snap.Items {
						if it.State == outbox.StateDead {
							t.Errorf("dead record %d %s: %s", it.Seq, it.Kind, it.Reason)
						}
					}
				}
				written := 0
				for _, it := range snap.Items {
					if it.TaskID == id {
						written++
					}
				}
				keys := map[string]int{}
				for _, e := range c.events(t, id) {
					keys[e.Key]++
				}
				if len(keys) != written {
					t.Errorf("the agent wrote %d records, the control plane holds %d distinct events", written, len(keys))
				}
				for k, n := range keys {
					if n != 1 {
						t.Errorf("event %s stored %d times", k, n)
					}
				}
			})
		}
	}
}

// The control plane killed between storing an events batch's events and
// the notification it causes (the completion's) and saving the task
// (after-notify): after the restart the
// task completes, and its notification reaches the receiver, under one id
// however often it is written again or delivered.
func TestE2EControlPlaneCrashAfterNotify(t *testing.T) {
	t.Parallel()
	addr, cpDir, dataDir, receiverAddr := freeAddr(t), t.TempDir(), t.TempDir(), freeAddr(t)
	flags := []string{"--notify-webhook", "http://" + receiverAddr + "/hook"}
	c := startCPEnv(t, []string{"AGENT_CP_CRASH=after-notify:notify"}, addr, cpDir, flags...)
	startAgentProc(t, c, dataDir)
	id := submit(t, c, "@progress 2\n@output done")
	c.wait() // it dies at its crash point
	if code := c.cmd.ProcessState.ExitCode(); code != -1 {
		t.Fatalf("the control plane exited %d, not by its crash point:\n%s", code, tail(c.output(), 2000))
	}
	secret, err := os.ReadFile(filepath.Join(cpDir, "notify-secret"))
	if err != nil {
		t.Fatal(err)
	}
	rv := &webhookReceiver{secret: []byte(strings.TrimSpace(string(secret))), byID: map[string][]byte{}, count: map[string]int{}}
	ln, err := net.Listen("tcp", receiverAddr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: rv}
	go hs.Serve(ln)
	defer hs.Close()
	c = startCP(t, addr, cpDir, flags...)
	if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
		t.Fatalf("after the crash: %s (%s)", v.Phase, v.PhaseReason)
	}
	key := id + " " + string(api.NotifyCompleted)
	testkit.WaitFor(t, "the completion's notification", func() bool { return len(rv.notes()[key]) > 0 })
	rv.mu.Lock()
	bad := rv.bad
	rv.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("deliveries refused: %q", bad)
	}
	if ids := rv.notes()[key]; len(ids) != 1 {
		t.Errorf("the completion came under %d ids, want 1: %v", len(ids), ids)
	}
}

// The crash switch is in this build, and the check that the shipped
// build has none (TestShippedBuildHasNoCrashSwitch) would see it.
func TestFaultBuildHoldsTheCrashSwitch(t *testing.T) {
	t.Parallel()
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if !holdsCrashSwitch(bin) {
		t.Fatalf("%s, built with -tags faults, holds no %s", os.Args[0], crashSwitchName())
	}
}
