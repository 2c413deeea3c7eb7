package agent

import (
	"testing"

	"github.com/edgeagent/agent/health"
)

func TestClaimBlocked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		free     int
		stopping bool
		reached  bool
		grade    health.Grade
		disk     string
		want     string
	}{
		{"room and reachable", 1, false, true, health.Available, "", ""},
		{"degraded still claims", 2, false, true, health.Degraded, "", ""},
		{"draining", 1, true, true, health.Available, "", "draining"},
		{"full", 0, false, true, health.Available, "", "no room: every slot runs a task"},
		{"unreachable", 1, false, false, health.Available, "", "the control plane is unreachable"},
		{"executor unavailable", 1, false, true, health.Unavailable, "", "the executor is unavailable"},
		{"disk full", 1, false, true, health.Available, "disk_full: no space left", "writes fail: disk_full: no space left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimBlocked(tc.free, tc.stopping, tc.reached, tc.grade, tc.disk); got != tc.want {
				t.Errorf("claimBlocked = %q, want %q", got, tc.want)
			}
		})
	}
}
