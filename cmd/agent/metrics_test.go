package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// --metrics-addr on both commands: the figures of a task run end to end,
// scraped over HTTP from the agent and from the control plane.
func TestMetricsFlagServesBoth(t *testing.T) {
	t.Parallel()
	cpMetrics, agentMetrics := freeAddr(t), freeAddr(t)
	c := startCP(t, freeAddr(t), t.TempDir(), "--metrics-addr", cpMetrics)
	ag := startAgentProc(t, c, filepath.Join(t.TempDir(), "agent"), "--metrics-addr", agentMetrics)
	id := submit(t, c, "@output hi")
	if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
		t.Fatalf("task ended %s", v.Phase)
	}
	for _, tc := range []struct {
		who, addr string
		want      []string
	}{
		{"agent", agentMetrics, []string{`agent_tasks{phase="completed"} 1`, `agent_attempts_total{code="none",outcome="completed"} 1`, `agent_outbox_pending_records 0`, `agent_executor_health{grade="available"} 1`}},
		{"control plane", cpMetrics, []string{`agent_controlplane_tasks{phase="completed"} 1`, `agent_controlplane_agents{state="running"} 1`, `agent_controlplane_events_total{result="accepted"}`}},
	} {
		t.Run(tc.who, func(t *testing.T) {
			var body string
			testkit.WaitFor(t, tc.who+"'s metrics", func() bool {
				body = scrape(t, tc.addr)
				for _, w := range tc.want {
					if !strings.Contains(body, w) {
						return false
					}
				}
				return true
			})
			if strings.Contains(body, id) {
				t.Errorf("a task id is a label in %s's metrics", tc.who)
			}
		})
	}
	ag.stop()
	if body := scrape(t, agentMetrics); body != "" {
		t.Errorf("the agent's metrics server outlived it")
	}
}
