package filestore

import (
	"os"
	"strings"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// repair reads only the tail it needs: whatever the torn part's length,
// it cuts back to the last whole line, and leaves a whole file alone.
func TestRepairCutsATornTailOfAnyLength(t *testing.T) {
	t.Parallel()
	whole := strings.Repeat(`{"key":"k"}`+"\n", 10000) // 120 KB of lines
	for _, tc := range []struct {
		name, text, want string
	}{
		{"whole", whole, whole},
		{"short torn tail", whole + `{"key":"to`, whole},
		{"torn tail over 64 KiB", whole + `{"key":"` + strings.Repeat("x", 100<<10), whole},
		{"only a torn line", strings.Repeat("x", 70<<10), ""},
		{"empty", "", ""},
	} {
		ev := events{dir: t.TempDir()}
		must(t, os.WriteFile(ev.path("t-1"), []byte(tc.text), 0o600))
		size, err := ev.repair("t-1")
		must(t, err)
		b, _ := os.ReadFile(ev.path("t-1"))
		if string(b) != tc.want || size != int64(len(tc.want)) {
			t.Errorf("%s: %d bytes left, size %d; want %d", tc.name, len(b), size, len(tc.want))
		}
	}
	if size, err := (events{dir: t.TempDir()}).repair("t-none"); size != 0 || err != nil {
		t.Errorf("no file: %d %v", size, err)
	}
}
