package outbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/durable"
)

// A failed write (a full disk, an I/O error) fails its appends and leaves
// nothing of them in the file; the outbox is not latched: once writes work
// again, appends succeed without a reopen, and a reopen finds exactly the
// records whose appends succeeded.
func TestFailedWriteIsRepairedAndWritesResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	if _, err := o.Append(rec("t", KindPhase, 0)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("no space left on device")
	o.sync = func(*os.File) error { return boom }
	if _, err := o.Append(rec("t", KindComplete, 1)); !errors.Is(err, boom) {
		t.Fatalf("Append while the disk fails: %v, want %v", err, boom)
	}
	st := o.Stats()
	if st.WriteErrors != 1 || st.WriteFailing == "" {
		t.Fatalf("stats while failing: write_errors %d, write_failing %q", st.WriteErrors, st.WriteFailing)
	}
	if st.Pending != 1 {
		t.Fatalf("pending %d while failing, want 1 (the failed record is not in)", st.Pending)
	}

	o.sync = durable.Datasync
	if _, err := o.Append(rec("t", KindComplete, 2)); err != nil {
		t.Fatalf("Append once the disk works again: %v", err)
	}
	if st := o.Stats(); st.WriteFailing != "" || st.Pending != 2 {
		t.Fatalf("after recovery: write_failing %q, pending %d; want none and 2", st.WriteFailing, st.Pending)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	o = openT(t, dir, Options{})
	st = o.Stats()
	if st.Quarantined != 0 || st.TornBytes != 0 || st.Pending != 2 {
		t.Fatalf("reopened: quarantined %d, torn %d, pending %d; want 0, 0, 2", st.Quarantined, st.TornBytes, st.Pending)
	}
	recs, err := o.Pending(10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.Contains(string(r.Payload), `"i": 1,`) {
			t.Fatalf("the record whose append failed is in the file: %s", r.Payload)
		}
	}
}

// A sync that fails after the write reached the file leaves the bytes
// there: the repair cuts them, so a failed append never comes back as a
// record after a restart.
func TestRepairCutsWhatAFailedBatchWrote(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	if _, err := o.Append(rec("t", KindPhase, 0)); err != nil {
		t.Fatal(err)
	}
	before := o.Stats().FileBytes
	o.sync = func(f *os.File) error {
		if info, err := f.Stat(); err == nil && info.Size() > before {
			return errors.New("EIO")
		}
		return durable.Datasync(f) // the repair's own sync
	}
	if _, err := o.Append(rec("t", KindProgress, 1)); err == nil {
		t.Fatal("Append succeeded though its sync failed")
	}
	info, err := os.Stat(o.Dir() + "/" + FileName)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != before {
		t.Fatalf("file is %d bytes after the repair, want %d", info.Size(), before)
	}
}

// A symbolic link planted in place of the outbox file is not followed:
// the agent would otherwise write its records wherever the link points.
func TestOutboxFileThatIsALinkIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	if o, err := Open(dir, Options{}); err == nil {
		o.Close()
		t.Fatal("Open followed a symbolic link")
	}
	if info, _ := os.Stat(target); info.Size() != 0 {
		t.Fatalf("the link's target was written: %d bytes", info.Size())
	}
}

// Deleting the lock file would let a second writer in: the outbox that
// holds the lock sees it, and a new Open takes a fresh lock.
func TestRemovedLockFileIsNoticed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	if err := o.CheckLock(); err != nil {
		t.Fatalf("a lock in place: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, LockName)); err != nil {
		t.Fatal(err)
	}
	if err := o.CheckLock(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("CheckLock after the lock file was removed: %v, want ErrLockLost", err)
	}
}
