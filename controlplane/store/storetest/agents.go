package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// byToken reports unless tokenHash belongs to want ("" for nobody).
func byToken(t *testing.T, st store.Store, tokenHash, want string) {
	t.Helper()
	got, err := st.AgentByToken(t.Context(), tokenHash)
	if err != nil || got != want {
		t.Errorf("AgentByToken(%s) = %q, %v; want %q", tokenHash, got, err, want)
	}
}

func register(t *testing.T, st store.Store, id, tokenHash string, replace bool) error {
	t.Helper()
	return st.Register(t.Context(), id, tokenHash, replace)
}

func (s suite) tokens(t *testing.T) {
	s.run(t, "a registered token names its agent", func(t *testing.T, st store.Store) {
		byToken(t, st, "h-a", "")
		if err := register(t, st, "a", "h-a", false); err != nil {
			t.Fatalf("Register(a): %v", err)
		}
		if err := register(t, st, "b", "h-b", false); err != nil {
			t.Fatalf("Register(b): %v", err)
		}
		byToken(t, st, "h-a", "a")
		byToken(t, st, "h-b", "b")
		byToken(t, st, "h-c", "")
	})
	s.run(t, "a registered id is ErrRegistered unless replace", func(t *testing.T, st store.Store) {
		if err := register(t, st, "a", "h-1", false); err != nil {
			t.Fatalf("Register(a): %v", err)
		}
		if err := register(t, st, "a", "h-2", false); !errors.Is(err, store.ErrRegistered) {
			t.Errorf("Register(a) again = %v, want ErrRegistered", err)
		}
		byToken(t, st, "h-1", "a")
		byToken(t, st, "h-2", "")
		if err := register(t, st, "a", "h-3", true); err != nil {
			t.Fatalf("Register(a, replace): %v", err)
		}
		byToken(t, st, "h-1", "")
		byToken(t, st, "h-3", "a")
	})
	s.run(t, "Revoke forgets the token and says whether there was one", func(t *testing.T, st store.Store) {
		if err := register(t, st, "a", "h-a", false); err != nil {
			t.Fatal(err)
		}
		if err := register(t, st, "b", "h-b", false); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id   string
			want bool
		}{{"a", true}, {"a", false}, {"nope", false}} {
			if got, err := st.Revoke(t.Context(), c.id); err != nil || got != c.want {
				t.Errorf("Revoke(%s) = %v, %v; want %v", c.id, got, err, c.want)
			}
		}
		byToken(t, st, "h-a", "")
		byToken(t, st, "h-b", "b")
		if err := register(t, st, "a", "h-a2", false); err != nil {
			t.Errorf("Register(a) after its Revoke: %v", err)
		}
		byToken(t, st, "h-a2", "a")
	})
}

// agent is a heartbeat's record of agent id, serving repos.
func agent(id string, m int, repos ...string) store.Agent {
	return store.Agent{
		View: api.AgentView{
			AgentID: id, Hostname: "host-" + id, Version: "v1.2.3",
			StartedAt: at(0), LastHeartbeat: at(m), Online: true, State: api.AgentRunning,
			Health:   health.Snapshot{Executor: "codex", Grade: health.Available, Since: at(0)},
			Capacity: api.Capacity{Max: 2, Running: 1},
			Running:  []api.RunningTask{{TaskID: "t1", Attempt: 1, Phase: state.PhaseTurnStarted, LastProgressAt: at(m)}},
			Outbox:   api.OutboxStats{Pending: 3, OldestPendingAgeS: 1.5, Bytes: 2048},
			Repos:    repos,
			Labels:   map[string]string{"site": "lab"},
		},
		Missing: map[string]int{"t2": 1},
	}
}

func agentOf(t *testing.T, st store.Store, id string) (store.Agent, bool) {
	t.Helper()
	a, ok, err := st.Agent(t.Context(), id)
	if err != nil {
		t.Fatalf("Agent(%s): %v", id, err)
	}
	return a, ok
}

func putAgent(t *testing.T, st store.Store, a store.Agent) {
	t.Helper()
	if err := st.PutAgent(t.Context(), a); err != nil {
		t.Fatalf("PutAgent(%s): %v", a.View.AgentID, err)
	}
}

func serves(t *testing.T, st store.Store, repo string, want bool) {
	t.Helper()
	if got, err := st.Serves(t.Context(), repo); err != nil || got != want {
		t.Errorf("Serves(%s) = %v, %v; want %v", repo, got, err, want)
	}
}

func (s suite) agents(t *testing.T) {
	s.run(t, "Agent of an unknown id is not ok", func(t *testing.T, st store.Store) {
		putAgent(t, st, agent("a", 1))
		if a, ok := agentOf(t, st, "nope"); ok {
			t.Errorf("Agent(nope) = %+v, ok", a)
		}
	})
	s.run(t, "PutAgent stores the latest record", func(t *testing.T, st store.Store) {
		first := agent("a", 1, "r1")
		putAgent(t, st, first)
		got, ok := agentOf(t, st, "a")
		if !ok {
			t.Fatal("Agent(a) after PutAgent: not ok")
		}
		same(t, "Agent(a)", got, first)

		latest := agent("a", 2, "r2")
		latest.View.State, latest.Missing = api.AgentDraining, nil
		putAgent(t, st, latest)
		got, _ = agentOf(t, st, "a")
		same(t, "Agent(a) after its next PutAgent", got, latest)
	})
	s.run(t, "Agents lists every record by id", func(t *testing.T, st store.Store) {
		want := []store.Agent{agent("a", 3), agent("b", 1), agent("c", 2)}
		for _, i := range []int{2, 0, 1} {
			putAgent(t, st, want[i])
		}
		putAgent(t, st, want[0]) // again: still one record
		got, err := st.Agents(t.Context())
		if err != nil {
			t.Fatalf("Agents: %v", err)
		}
		same(t, "Agents", got, want)
	})
	s.run(t, "Serves answers from the agents' latest records", func(t *testing.T, st store.Store) {
		serves(t, st, "r1", false)
		putAgent(t, st, agent("a", 1, "r1", "r2"))
		putAgent(t, st, agent("b", 1, "r3"))
		serves(t, st, "r1", true)
		serves(t, st, "r2", true)
		serves(t, st, "r3", true)
		serves(t, st, "r4", false)
		putAgent(t, st, agent("a", 2, "r2"))
		serves(t, st, "r1", false)
		serves(t, st, "r2", true)
	})
}

func (s suite) lead(t *testing.T) {
	s.run(t, "a single store leads", func(t *testing.T, st store.Store) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			lead, err := st.Lead(t.Context())
			if err != nil {
				t.Fatalf("Lead: %v", err)
			}
			if lead {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("Lead is false after 5s, with no other replica")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if lead, err := st.Lead(t.Context()); err != nil || !lead {
			t.Errorf("Lead after leading = %v, %v; want true", lead, err)
		}
	})
}
