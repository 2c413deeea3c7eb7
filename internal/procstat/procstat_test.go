package procstat

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// TestANameWithSpacesAndParentheses: the fields count from the name's
// last ')', whatever the name holds. A copy of sleep named "a) b (c 1 2"
// runs as this process's child; its ppid (field 4) must be this process.
func TestANameWithSpacesAndParentheses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat is Linux's")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on PATH")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "a) b (c 1 2")
	if err := os.WriteFile(bin, b, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	f, err := Read(strconv.Itoa(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if ppid, ok := f.Uint(4); !ok || int(ppid) != os.Getpid() {
		t.Errorf("field 4 (ppid) = %d, %v; want %d", ppid, ok, os.Getpid())
	}
	if st := f.Field(3); len(st) != 1 {
		t.Errorf("field 3 (state) = %q, want one letter", st)
	}
	if f.Field(2) != nil || f.Field(len(f)+3) != nil {
		t.Errorf("fields before 3 or past the end are not nil")
	}
	if self, err := Read("self"); err != nil || len(self) < 49 {
		t.Errorf("Read(self): %d fields, %v", len(self), err)
	}
}
