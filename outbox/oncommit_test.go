package outbox

import (
	"sync"
	"testing"
	"time"
)

// TestOnCommitSeesEverySyncedRecord: OnCommit is told of each group
// commit that synced records, and of no commit of marks alone (those are
// not synced).
func TestOnCommitSeesEverySyncedRecord(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		records int
		bytes   int64
		commits int
	)
	o := openT(t, t.TempDir(), Options{OnCommit: func(n int, b int64, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		records, bytes, commits = records+n, bytes+b, commits+1
		if n <= 0 || b <= 0 || took < 0 {
			t.Errorf("OnCommit(%d, %d, %v)", n, b, took)
		}
	}})
	var seqs []uint64
	for i := range 5 {
		seq, err := o.Append(rec("t-1", KindLog, i))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	if err := o.MarkSent(seqs...); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	st := o.Stats()
	if records != 5 || uint64(commits) != st.Syncs || bytes <= 0 || bytes > st.FileBytes {
		t.Errorf("OnCommit saw %d records, %d bytes in %d commits; the outbox appended 5 in %d syncs, file %d bytes",
			records, bytes, commits, st.Syncs, st.FileBytes)
	}
}
