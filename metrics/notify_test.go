package metrics_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/metrics"
)

// countsSource is a fixed NotificationSource.
type countsSource map[string]map[string]uint64

func (c countsSource) ByTarget() map[string]map[string]uint64 { return c }

// The notification deliveries are counted by target and result, every
// result of every target present.
func TestNotificationCounts(t *testing.T) {
	var cpm *metrics.ControlPlane
	servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond},
		Wrap: func(srv *server.Server, h http.Handler) http.Handler {
			cpm = metrics.NewControlPlane(srv)
			return cpm.Instrument(h)
		}})
	cpm.Notifications(countsSource{
		"hooks":     {"delivered": 3, "failed": 2, "given_up": 0, "dropped": 0},
		"ops-slack": {"delivered": 1, "failed": 0, "given_up": 1, "dropped": 0},
	})
	ms, err := metrics.Listen("0", cpm.Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	got := scrape(t, ms.Addr())
	for _, c := range []struct {
		target, result string
		want           float64
	}{
		{"hooks", "delivered", 3}, {"hooks", "failed", 2}, {"hooks", "given_up", 0},
		{"ops-slack", "given_up", 1}, {"ops-slack", "dropped", 0},
	} {
		if v := value(got, "agent_controlplane_notifications_total", "target", c.target, "result", c.result); v != c.want {
			t.Errorf("notifications_total{target=%q,result=%q} = %v, want %v", c.target, c.result, v, c.want)
		}
	}
	if f := got["agent_controlplane_notifications_total"]; f == nil || len(f.GetMetric()) != 8 {
		t.Errorf("want 8 series (2 targets, 4 results), got %v", f)
	}
}
