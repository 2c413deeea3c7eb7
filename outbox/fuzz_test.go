package outbox

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzOpen writes arbitrary bytes as an outbox file and opens it. Open must
// not panic or fail, must keep only records that were lines of the input,
// with rising seqs, and must leave a file that opens again clean, with the
// same pending records.
func FuzzOpen(f *testing.F) {
	valid := validOutboxBytes(f)
	f.Add(valid)
	f.Add(valid[:len(valid)-7])                                            // torn tail
	f.Add(append(slices.Clone(valid), make([]byte, 512)...))               // tail of zeros
	f.Add(bytes.Replace(valid, []byte(`"seq":2,`), []byte(`"seq":9,`), 1)) // crc mismatch in the middle
	f.Add([]byte("\n\n{}\n{\"op\":\"sent\"}\nnot json at all\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := Open(dir, Options{MaxRecordBytes: 4096})
		if err != nil {
			t.Fatalf("Open failed on corrupt input: %v", err)
		}
		first, err := o.Pending(1<<20, 1<<40)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(first); i++ {
			if first[i].Seq <= first[i-1].Seq {
				t.Fatalf("seq %d after %d", first[i].Seq, first[i-1].Seq)
			}
		}
		recovered, _ := os.ReadFile(path)
		inputLines := map[string]bool{}
		for _, l := range bytes.Split(data, []byte{'\n'}) {
			inputLines[string(l)] = true
		}
		for _, l := range bytes.Split(bytes.TrimSuffix(recovered, []byte{'\n'}), []byte{'\n'}) {
			if len(recovered) == 0 {
				break // all of it was garbage: truncated to nothing
			}
			var d line
			if err := decode(l, &d); err != nil {
				t.Fatalf("recovered file holds an invalid line %q: %v", l, err)
			}
			// Compaction may rewrite marks; a record it must copy verbatim.
			if d.Op == "" && !inputLines[string(l)] {
				t.Fatalf("recovered file holds a record that was not in the input: %q", l)
			}
		}

		o, err = Open(dir, Options{MaxRecordBytes: 4096})
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		defer o.Close()
		if st := o.Stats(); st.Quarantined != 0 || st.TornBytes != 0 {
			t.Fatalf("second Open found corruption again: %+v", st)
		}
		again, _ := o.Pending(1<<20, 1<<40)
		if len(again) != len(first) {
			t.Fatalf("second Open: %d pending, first: %d", len(again), len(first))
		}
		for i := range again {
			if again[i].Seq != first[i].Seq || !bytes.Equal(again[i].Payload, first[i].Payload) {
				t.Fatalf("record %d differs between opens", i)
			}
		}
	})
}

// validOutboxBytes returns the bytes of a small, valid outbox with records,
// marks and a dead record.
func validOutboxBytes(f *testing.F) []byte {
	dir := f.TempDir()
	o, err := Open(dir, Options{})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 4 {
		if _, err := o.Append(rec("t", KindProgress, i)); err != nil {
			f.Fatal(err)
		}
	}
	o.MarkSent(1)
	o.MarkFailed("503", 2)
	o.MarkDead("terminal", 3)
	o.Close()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzDecodeRecordFast: whatever line the fast record reader accepts,
// encoding/json reads to the same record.
func FuzzDecodeRecordFast(f *testing.F) {
	f.Add([]byte(`{"kind":"log","task_id":"t","attempt":1,"created_at":"2026-11-21T12:00:00.000000000Z","payload":{"a":1},"key":"k","seq":3`))
	f.Add([]byte(`{"kind":"log","task_id":"t","attempt":-2,"created_at":"2026-02-30T12:00:00.000000000Z","payload":{},"key":"k","seq":3`))
	f.Add([]byte(`{"kind":"log","task_id":"t","attempt":1,"created_at":"2026-11-21T12:00:00.000000000Z","payload":{},"op":"sent","key":"k","seq":3`))
	f.Add([]byte(`{"kind":"log","task_id":"t","attempt":01,"created_at":"2026-11-21T12:00:00.000000000Z","payload":{"key":"x"},"key":"k","seq":3`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast line
		if !decodeRecordFast(body, &fast) {
			return
		}
		var slow line
		if err := json.Unmarshal(append(slices.Clone(body), '}'), &slow); err != nil {
			t.Fatalf("fast read accepted %q; encoding/json: %v", body, err)
		}
		if fast.Op != slow.Op || fast.Seq != slow.Seq || fast.Key != slow.Key || fast.Kind != slow.Kind || fast.TaskID != slow.TaskID ||
			fast.Attempt != slow.Attempt || !fast.CreatedAt.Equal(slow.CreatedAt) || !bytes.Equal(fast.Payload, slow.Payload) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", body, fast, slow)
		}
	})
}
