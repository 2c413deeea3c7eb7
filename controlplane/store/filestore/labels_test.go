package filestore

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// A directory of a control plane from before granted labels: the agents
// registered then adopt the labels they advertise, once, and that
// outlives a restart; an agent registered after adopts nothing. The file
// of granted labels is the store's alone (0600).
func TestEarlierAgentsAdoptTheirLabelsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	r := openReg(t, dir) // as a control plane from before wrote it
	must(t, r.register("old", "h-old", false))
	must(t, r.register("gone", "h-gone", false))
	must(t, r.close())

	s := open(t, dir)
	if info, err := os.Stat(filepath.Join(dir, "agent-labels.json")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("agent-labels.json: %v, %v", info, err)
	}
	must(t, s.Register(ctx, "new", "h-new", false))
	if ok, err := s.Revoke(ctx, "gone"); err != nil || !ok {
		t.Fatalf("Revoke(gone) = %v, %v", ok, err)
	}
	if a, _, _ := s.Agent(ctx, "old"); !a.AdoptLabels {
		t.Fatal("an agent registered before granted labels is not to adopt its own")
	}
	if ok, err := s.AdoptLabels(ctx, "old", map[string]string{"gpu": "a100"}); err != nil || !ok {
		t.Fatalf("AdoptLabels(old) = %v, %v", ok, err)
	}
	for _, id := range []string{"old", "new", "gone"} {
		if ok, err := s.AdoptLabels(ctx, id, map[string]string{"tier": "secure"}); err != nil || ok {
			t.Errorf("AdoptLabels(%s) = %v, %v; want false", id, ok, err)
		}
	}
	must(t, s.Close())

	s = open(t, dir)
	defer s.Close()
	if a, _, _ := s.Agent(ctx, "old"); a.AdoptLabels || !maps.Equal(a.Granted, map[string]string{"gpu": "a100"}) {
		t.Errorf("after a restart, old holds %v (adopt %v)", a.Granted, a.AdoptLabels)
	}
	for _, id := range []string{"new", "gone"} {
		if a, _, _ := s.Agent(ctx, id); a.AdoptLabels || a.Granted != nil {
			t.Errorf("after a restart, %s holds %v (adopt %v)", id, a.Granted, a.AdoptLabels)
		}
	}
}
