package controlplane

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

// TestEncodeEventsReadsAsEncodingJSON: the hand-made body of POST
// /v1/events decodes to the same request as encoding/json's, whatever the
// strings hold, and carries each payload byte for byte.
func TestEncodeEventsReadsAsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 120, time.UTC)
	cases := []struct {
		name   string
		events []api.Event
	}{
		{"plain", []api.Event{{Key: "t-1:log:1", Kind: "log", TaskID: "t-1", Attempt: 2, LeaseID: "l-1", CreatedAt: at, Payload: json.RawMessage(`{"a": [1, 2]}`)}}},
		{"escapes", []api.Event{{Key: "k\"\\<&>\u2028é\n", Kind: "phase", TaskID: "t \"x\"", Attempt: -1, CreatedAt: at.In(time.FixedZone("x", 3600)), Payload: json.RawMessage(`"s"`)}}},
		{"several", []api.Event{
			{Key: "a", Kind: "log", TaskID: "t", CreatedAt: at, Payload: json.RawMessage(`1`)},
			{Key: "b", Kind: "progress", TaskID: "t", CreatedAt: at, Payload: json.RawMessage(`{"pad":"<b>"}`)},
		}},
		{"none", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := encodeEvents("agent-1", c.events)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(api.EventsRequest{AgentID: "agent-1", Events: c.events})
			var got, exp map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			json.Unmarshal(want, &exp)
			if len(c.events) == 0 {
				exp["events"] = []any{} // encoding/json writes null for no events; an empty list says the same
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("hand-made body\n%s\nencoding/json\n%s", body, want)
			}
			var req api.EventsRequest
			json.Unmarshal(body, &req)
			for i, e := range c.events {
				if string(req.Events[i].Payload) != string(e.Payload) {
					t.Errorf("payload %d: %s, want %s", i, req.Events[i].Payload, e.Payload)
				}
			}
		})
	}
	if _, err := encodeEvents("a", []api.Event{{Key: "k"}}); err == nil {
		t.Error("an event without a payload was encoded")
	}
}
