// Package outboxview is the agent's outbox as a person at a terminal sees
// it and looks after it (agent outbox ls, stats, tail, compact, purge;
// agent service status's outbox line): the table of records, the stats,
// a record's line, following appends, and compaction and purges by hand
// with their one-line results. It reads the outbox through package
// outbox; no commands, no flags.
package outboxview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/outbox"
)

// Dir is where the outbox lives in a data directory.
func Dir(dataDir string) string { return filepath.Join(dataDir, "outbox") }

// Require fails, clearly, unless the data directory holds an outbox: the
// commands that open it as its writer would otherwise create one where a
// mistyped path points.
func Require(dataDir string) error {
	if _, err := os.Stat(filepath.Join(Dir(dataDir), outbox.FileName)); err != nil {
		return Explain(dataDir, outbox.ErrNoOutbox)
	}
	return nil
}

// Explain turns the outbox's errors into a sentence for the person at the
// terminal.
func Explain(dataDir string, err error) error {
	switch {
	case errors.Is(err, outbox.ErrNoOutbox):
		return fmt.Errorf("no outbox in data directory %s (is --data-dir right?)", dataDir)
	case errors.Is(err, outbox.ErrLocked):
		return fmt.Errorf("%w; stop the agent first", err)
	}
	return err
}

// WriteItems writes items as a table, a row each, their ages as of now.
func WriteItems(w io.Writer, items []outbox.Item, now time.Time) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, "no records")
		return err
	}
	tw := taskview.NewTable(w)
	fmt.Fprintln(tw, "SEQ\tKEY\tKIND\tTASK\tATT\tAGE\tSTATE\tTRIES\tLAST ERROR")
	for _, it := range items {
		last := it.LastError
		if it.State == outbox.StateDead {
			last = "dead: " + it.Reason
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\n", it.Seq, taskview.Visible(it.Key), taskview.Visible(string(it.Kind)), taskview.Visible(it.TaskID),
			it.Attempt, taskview.Ago(now, it.CreatedAt), it.State, it.Tries, taskview.Dash(taskview.Visible(last)))
	}
	return tw.Flush()
}

// WriteStats writes st a line each, "name: value", ages as of now.
func WriteStats(w io.Writer, st outbox.Stats, now time.Time) error {
	oldest := "-"
	if !st.OldestPending.IsZero() {
		oldest = taskview.Age(now.Sub(st.OldestPending))
	}
	lastCompaction := "never"
	if !st.LastCompaction.IsZero() {
		lastCompaction = taskview.Ago(now, st.LastCompaction)
	}
	rows := [][2]string{
		{"pending", fmt.Sprint(st.Pending)},
		{"sent (not yet compacted)", fmt.Sprint(st.Sent)},
		{"dead", fmt.Sprint(st.Dead)},
		{"oldest pending", oldest},
		{"file", bytesize.Tenths(st.FileBytes)},
		{"live", bytesize.Tenths(st.LiveBytes)},
		{"reclaimable", bytesize.Tenths(st.GarbageBytes)},
		{"last compaction", lastCompaction},
		{"next seq", fmt.Sprint(st.NextSeq)},
	}
	switch {
	case st.DiskFreeBytes < 0:
	case st.DiskFreeBytes < 1<<20:
		rows = append(rows, [2]string{"disk free", bytesize.Tenths(st.DiskFreeBytes) + " (full: a running agent holds reports in memory until space returns)"})
	default:
		rows = append(rows, [2]string{"disk free", bytesize.Tenths(st.DiskFreeBytes)})
	}
	if st.Quarantined > 0 {
		rows = append(rows, [2]string{"corrupt lines", fmt.Sprintf("%d (set aside at the agent's next start)", st.Quarantined)})
	}
	tw := taskview.NewTable(w)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// Summary is the outbox of a data directory in a line (agent service
// status), read without the lock.
func Summary(dataDir string) string {
	if _, err := os.Stat(Dir(dataDir)); errors.Is(err, iofs.ErrNotExist) {
		return "none yet (the agent has not run here)"
	}
	snap, err := outbox.Inspect(Dir(dataDir))
	if err != nil {
		return "unreadable: " + strings.Join(strings.Fields(err.Error()), " ")
	}
	return fmt.Sprintf("%d records pending, %d dead", snap.Stats.Pending, snap.Stats.Dead)
}

// WriteRecord writes one record: a JSON line, or a line for people with
// the payload as compact JSON.
func WriteRecord(w io.Writer, r outbox.Record, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	fmt.Fprintf(w, "%d  %s  %-8s  %s#%d  %s\n", r.Seq, r.CreatedAt.Local().Format("15:04:05.000"), taskview.Visible(string(r.Kind)), taskview.Visible(r.TaskID), r.Attempt, taskview.Visible(string(r.Payload)))
}

// TailPoll is how often Tail, following, looks at the file even without
// an fsnotify event, for file systems that do not deliver them.
var TailPoll = 2 * time.Second

// Tail gives each of the last records of the outbox in dir to fn, at most
// last of them, oldest first; then, with follow, every record appended
// after, compactions and all, until ctx ends.
func Tail(ctx context.Context, dir string, last int, follow bool, fn func(outbox.Record)) error {
	tl, err := outbox.NewTailer(dir, 0)
	if err != nil {
		return err
	}
	defer tl.Close()
	// Watch before the first read, so no append falls between them. The
	// directory, not the file: compaction renames a new file in.
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	defer w.Close()
	if follow {
		if err := w.Add(dir); err != nil {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
	}
	ring := make([]outbox.Record, 0, last)
	err = tl.Next(func(r outbox.Record) {
		if last == 0 {
			return
		}
		if len(ring) == last {
			ring = append(ring[:0], ring[1:]...)
		}
		ring = append(ring, r)
	})
	if err != nil {
		return err
	}
	for _, r := range ring {
		fn(r)
	}
	if !follow {
		return nil
	}
	tick := time.NewTicker(TailPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-w.Events:
			if filepath.Base(ev.Name) != outbox.FileName {
				continue
			}
		case err := <-w.Errors:
			return fmt.Errorf("watch %s: %w", dir, err)
		case <-tick.C:
		}
		if err := tl.Next(fn); err != nil {
			return err
		}
	}
}

// maintain opens the outbox of dataDir as its writer (the agent stopped),
// runs do and closes it, every error said for a person.
func maintain(dataDir string, do func(*outbox.Outbox) error) error {
	if err := Require(dataDir); err != nil {
		return err
	}
	o, err := outbox.Open(Dir(dataDir), outbox.Options{})
	if err != nil {
		return Explain(dataDir, err)
	}
	defer o.Close()
	if err := do(o); err != nil {
		return err
	}
	return o.Close()
}

// Compact compacts the outbox of dataDir by hand, the agent stopped;
// progress is told how far the copy of live records is.
func Compact(dataDir string, progress func(done, total int)) (res outbox.CompactResult, err error) {
	err = maintain(dataDir, func(o *outbox.Outbox) error {
		res, err = o.Compact(progress)
		return err
	})
	return res, err
}

// CompactLine says what a compaction did.
func CompactLine(res outbox.CompactResult) string {
	return fmt.Sprintf("compacted %s to %s, %d live records kept, appends paused %s",
		bytesize.Tenths(res.BytesBefore), bytesize.Tenths(res.BytesAfter), res.Records, res.Pause.Round(1000))
}

// Purged is what a purge by hand did (agent outbox purge --json prints
// it): the dead records purged and kept, and the compaction after.
type Purged struct {
	outbox.PurgeResult
	Compaction outbox.CompactResult `json:"compaction"`
}

// PurgeDead removes the dead records of dataDir's outbox marked dead
// before cutoff (zero: every one), the agent stopped, then compacts it if
// any went, so that their bytes go too.
func PurgeDead(dataDir string, cutoff time.Time) (res Purged, err error) {
	err = maintain(dataDir, func(o *outbox.Outbox) error {
		if res.PurgeResult, err = o.PurgeDead(cutoff); err != nil || res.Purged == 0 {
			return err
		}
		res.Compaction, err = o.Compact(nil)
		return err
	})
	return res, err
}

// Line says what the purge did; olderThan is the age a dead record needed
// to go.
func (p Purged) Line(olderThan time.Duration) string {
	s := fmt.Sprintf("purged %d dead records (%s)", p.Purged, bytesize.Tenths(p.Bytes))
	if p.Kept > 0 {
		s += fmt.Sprintf("; %d dead for less than %s kept", p.Kept, olderThan)
	}
	if p.Purged > 0 {
		s += fmt.Sprintf("; outbox compacted from %s to %s", bytesize.Tenths(p.Compaction.BytesBefore), bytesize.Tenths(p.Compaction.BytesAfter))
	}
	return s
}
