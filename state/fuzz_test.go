package state

import (
	"os"
	"path/filepath"
	"testing"
)

// A task file is outside input (a crash, an older version, a hand edit):
// whatever it holds, loading it either yields a task that passes its own
// checks or an error, never a panic.
func FuzzLoadTaskFile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "state", "*.json"))
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"schema_version":1,"id":"t-1","phase":"claimed","attempts":[{"attempt_id":"a","number":1,"status":"running"}]}`))
	f.Add([]byte(`{"schema_version":1,"id":"t-1","phase":"completed","current_attempt_id":"nope"}`))
	f.Add([]byte(`{"id":"t-1","status":"running"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "t-1.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		task, err := loadFile(path, nil)
		if err != nil {
			return
		}
		if err := task.Check(); err != nil {
			t.Fatalf("a loaded task fails its own checks: %v", err)
		}
		_ = ProgressCard(task)
		_ = Timeline(task, task.UpdatedAt)
		_ = task.Clone()
	})
}
