package storetest

import (
	"errors"
	"maps"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
)

// grant grants agent id labels set and takes back remove, and checks
// what it then holds.
func grant(t *testing.T, st store.Store, id string, set map[string]string, remove []string, want map[string]string) {
	t.Helper()
	got, err := st.GrantLabels(t.Context(), id, set, remove)
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("GrantLabels(%s, %v, %v) = %v, %v; want %v", id, set, remove, got, err, want)
	}
}

// granted checks the labels Agent, AgentAndLeased and Agents read for
// agent id.
func granted(t *testing.T, st store.Store, id string, want map[string]string) {
	t.Helper()
	a, _ := agentOf(t, st, id)
	if !maps.Equal(a.Granted, want) || a.AdoptLabels {
		t.Errorf("Agent(%s).Granted = %v (adopt %v); want %v", id, a.Granted, a.AdoptLabels, want)
	}
	b, _, _, err := st.AgentAndLeased(t.Context(), id)
	if err != nil || !maps.Equal(b.Granted, want) {
		t.Errorf("AgentAndLeased(%s).Granted = %v, %v; want %v", id, b.Granted, err, want)
	}
	all, err := st.Agents(t.Context())
	if err != nil {
		t.Fatalf("Agents: %v", err)
	}
	for _, x := range all {
		if x.View.AgentID == id && !maps.Equal(x.Granted, want) {
			t.Errorf("Agents: %s's Granted = %v; want %v", id, x.Granted, want)
		}
	}
}

func (s suite) labels(t *testing.T) {
	s.run(t, "GrantLabels sets and removes, kept apart from heartbeats", func(t *testing.T, st store.Store) {
		if err := register(t, st, "a", "h-a", false); err != nil {
			t.Fatal(err)
		}
		// Granted before the agent's first heartbeat: read all the same.
		grant(t, st, "a", map[string]string{"tier": "secure", "gpu": "a100"}, nil, map[string]string{"tier": "secure", "gpu": "a100"})
		if a, ok := agentOf(t, st, "a"); ok || !maps.Equal(a.Granted, map[string]string{"tier": "secure", "gpu": "a100"}) {
			t.Errorf("Agent(a) before any heartbeat = ok %v, Granted %v; want not ok, with its granted labels", ok, a.Granted)
		}
		// A heartbeat's record, whatever it says, changes none of them.
		rec := agent("a", 1)
		rec.View.Labels = map[string]string{"tier": "anything"}
		rec.Granted = map[string]string{"tier": "forged"}
		putAgent(t, st, rec)
		granted(t, st, "a", map[string]string{"tier": "secure", "gpu": "a100"})
		grant(t, st, "a", map[string]string{"gpu": "h100", "zone": "eu"}, []string{"tier", "nope"}, map[string]string{"gpu": "h100", "zone": "eu"})
		putAgent(t, st, agent("a", 2))
		granted(t, st, "a", map[string]string{"gpu": "h100", "zone": "eu"})
		grant(t, st, "a", nil, []string{"gpu", "zone"}, map[string]string{})
		granted(t, st, "a", nil)
	})
	s.run(t, "GrantLabels of an id with no token is ErrNotRegistered", func(t *testing.T, st store.Store) {
		putAgent(t, st, agent("ghost", 1))
		if got, err := st.GrantLabels(t.Context(), "ghost", map[string]string{"tier": "secure"}, nil); !errors.Is(err, store.ErrNotRegistered) {
			t.Errorf("GrantLabels(ghost) = %v, %v; want ErrNotRegistered", got, err)
		}
		granted(t, st, "ghost", nil)
	})
	s.run(t, "Revoke forgets the granted labels", func(t *testing.T, st store.Store) {
		if err := register(t, st, "a", "h-a", false); err != nil {
			t.Fatal(err)
		}
		putAgent(t, st, agent("a", 1))
		grant(t, st, "a", map[string]string{"tier": "secure"}, nil, map[string]string{"tier": "secure"})
		if err := register(t, st, "a", "h-a2", true); err != nil { // renewed: still the agent
			t.Fatal(err)
		}
		granted(t, st, "a", map[string]string{"tier": "secure"})
		if ok, err := st.Revoke(t.Context(), "a"); err != nil || !ok {
			t.Fatalf("Revoke(a) = %v, %v", ok, err)
		}
		granted(t, st, "a", nil)
		// Whoever registers the id next starts with none.
		if err := register(t, st, "a", "h-rogue", false); err != nil {
			t.Fatal(err)
		}
		granted(t, st, "a", nil)
	})
	s.run(t, "an agent registered now adopts nothing", func(t *testing.T, st store.Store) {
		if err := register(t, st, "a", "h-a", false); err != nil {
			t.Fatal(err)
		}
		putAgent(t, st, agent("a", 1))
		if ok, err := st.AdoptLabels(t.Context(), "a", map[string]string{"tier": "secure"}); ok || err != nil {
			t.Errorf("AdoptLabels(a) = %v, %v; want false: only an agent from before granted labels adopts its own", ok, err)
		}
		granted(t, st, "a", nil)
	})
}
