package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTasksCommandsDoNotCreateAMistypedDataDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{{"tasks", "ls"}, {"tasks", "show", "t-1"}, {"tasks", "logs", "t-1"}, {"health"}} {
		r := runAgent(t, append(args, "--data-dir", missing)...)
		wantOneLineError(t, r, 1, missing)
		if _, err := os.Stat(missing); err == nil {
			t.Fatalf("%v created %s", args, missing)
		}
	}
	if r := runAgent(t, "tasks", "show", "../../etc/passwd", "--data-dir", t.TempDir()); r.code != 1 {
		t.Errorf("a path as a task id: %+v", r)
	}
}
