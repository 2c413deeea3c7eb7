package storetest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
)

// secret checks Secret: random bytes of the size asked, the same bytes to
// every call and every goroutine, one secret per name, and one size per
// name.
func (s suite) secret(t *testing.T) {
	s.run(t, "asked again, the same bytes", func(t *testing.T, st store.Store) {
		a, err := st.Secret(t.Context(), "task-token", 32)
		if err != nil || len(a) != 32 {
			t.Fatalf("Secret = %d bytes, %v; want 32", len(a), err)
		}
		if bytes.Equal(a, make([]byte, 32)) {
			t.Fatal("Secret is all zeros")
		}
		b, err := st.Secret(t.Context(), "task-token", 32)
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("Secret asked again = %x, %v; want %x", b, err, a)
		}
		other, err := st.Secret(t.Context(), "other", 32)
		if err != nil || bytes.Equal(a, other) {
			t.Fatalf("Secret(other) = %x, %v; want bytes of its own", other, err)
		}
	})
	s.run(t, "concurrent first asks agree", func(t *testing.T, st store.Store) {
		const n = 8
		got := make([][]byte, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				b, err := st.Secret(t.Context(), "raced", 16)
				if err != nil {
					t.Errorf("Secret: %v", err)
				}
				got[i] = b
			})
		}
		wg.Wait()
		for i := 1; i < n; i++ {
			if !bytes.Equal(got[i], got[0]) {
				t.Fatalf("concurrent first asks got %x and %x", got[0], got[i])
			}
		}
	})
	s.run(t, "one size per name", func(t *testing.T, st store.Store) {
		if _, err := st.Secret(t.Context(), "sized", 32); err != nil {
			t.Fatal(err)
		}
		if b, err := st.Secret(t.Context(), "sized", 16); err == nil {
			t.Fatalf("Secret with another size = %x, nil; want an error", b)
		}
	})
}
