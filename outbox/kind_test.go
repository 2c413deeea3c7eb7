package outbox

import (
	"encoding/json"
	"testing"
)

// A record of a kind this version does not know (written by a newer one)
// is kept, not quarantined, across a reopen: a downgrade loses nothing.
func TestUnknownKindSurvivesAReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	mustAppend(t, o, Record{Kind: "approval_v2", TaskID: "t", Attempt: 1, Payload: json.RawMessage(`{"x":1}`)})
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o = openT(t, dir, Options{})
	st := o.Stats()
	if st.Quarantined != 0 || st.Pending != 1 {
		t.Fatalf("after a reopen: quarantined %d, pending %d; want 0 and 1", st.Quarantined, st.Pending)
	}
	recs, err := o.Pending(10, 1<<20)
	if err != nil || len(recs) != 1 || recs[0].Kind != "approval_v2" {
		t.Fatalf("pending %+v %v", recs, err)
	}
	for _, bad := range []Kind{"", "Phase", "a b", "x\n", Kind(make([]byte, 33))} {
		if _, err := o.Append(Record{Kind: bad, TaskID: "t", Payload: json.RawMessage(`{}`)}); err == nil {
			t.Errorf("kind %q was taken", bad)
		}
	}
}
