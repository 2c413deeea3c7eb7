package pgstore

import (
	"context"
	"maps"
	"testing"

	"github.com/edgeagent/agent/internal/pgtest"
)

// A database of version 5, whose agents advertised their labels and
// nobody granted any (there was no way to): after migration 00006 each
// agent registered then adopts the labels it advertises, once, and an
// agent registered after adopts nothing. A revoked agent adopts nothing.
func TestMigrationLetsEarlierAgentsAdoptTheirLabelsOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	migrateTo(t, dsn, 5)
	ctx := context.Background()
	c := connect(t, dsn)
	for _, id := range []string{"old", "gone"} {
		if _, err := c.Exec(ctx, `INSERT INTO agents (id, token_hash, record) VALUES ($1, $2, $3)`,
			id, "h-"+id, []byte(`{"view":{"agent_id":"`+id+`","labels":{"gpu":"a100"}}}`)); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn)
	if ok, err := s.Revoke(ctx, "gone"); err != nil || !ok {
		t.Fatalf("Revoke(gone) = %v, %v", ok, err)
	}
	if err := s.Register(ctx, "new", "h-new", false); err != nil {
		t.Fatal(err)
	}
	a, ok, err := s.Agent(ctx, "old")
	if err != nil || !ok || !a.AdoptLabels || a.Granted != nil {
		t.Fatalf("Agent(old) = %+v, %v, %v; want to adopt its labels, none granted yet", a, ok, err)
	}
	labels := map[string]string{"gpu": "a100", "team": "infra"}
	for i, want := range []bool{true, false} {
		if got, err := s.AdoptLabels(ctx, "old", labels); err != nil || got != want {
			t.Errorf("AdoptLabels(old) #%d = %v, %v; want %v", i+1, got, err, want)
		}
		labels = map[string]string{"tier": "secure"} // the second is not adopted
	}
	if a, _, _ := s.Agent(ctx, "old"); a.AdoptLabels || !maps.Equal(a.Granted, map[string]string{"gpu": "a100", "team": "infra"}) {
		t.Errorf("Agent(old) after adopting: %v, adopt %v", a.Granted, a.AdoptLabels)
	}
	for _, id := range []string{"gone", "new"} {
		if got, err := s.AdoptLabels(ctx, id, map[string]string{"tier": "secure"}); err != nil || got {
			t.Errorf("AdoptLabels(%s) = %v, %v; want false", id, got, err)
		}
		if a, _, _ := s.Agent(ctx, id); a.Granted != nil {
			t.Errorf("Agent(%s).Granted = %v", id, a.Granted)
		}
	}
}

// An id whose token a replica from before granted labels revoked (it
// left the labels in place) starts with none when registered anew.
func TestRegisterAnewClearsLabelsLeftByAnOlderRevoke(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Register(ctx, "a", "h-a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GrantLabels(ctx, "a", map[string]string{"tier": "secure"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE agents SET token_hash = NULL WHERE id = 'a'`); err != nil { // as 00005's Revoke
		t.Fatal(err)
	}
	if err := s.Register(ctx, "a", "h-rogue", false); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := s.Agent(ctx, "a"); a.Granted != nil || a.AdoptLabels {
		t.Errorf("an id registered anew holds labels %v (adopt %v)", a.Granted, a.AdoptLabels)
	}
}
