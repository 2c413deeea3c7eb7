package logformat

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// streamOf is JOURNAL_STREAM naming f (DEVICE:INODE), as systemd sets it.
func streamOf(t *testing.T, f *os.File) string {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(uint64(st.Dev), 10) + ":" + strconv.FormatUint(uint64(st.Ino), 10)
}

// Each level goes to its priority, debug included; a message's line
// break does not start a line of no priority; attributes of WithAttrs and
// WithGroup keep the prefix.
func TestJournalHandler(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !onJournal(f, streamOf(t, f)) || onJournal(f, "") || onJournal(f, "1:2") || onJournal(f, "x:y") {
		t.Fatal("onJournal does not tell the journal's stream from others")
	}
	var lv slog.LevelVar
	lv.Set(slog.LevelDebug)
	t.Setenv("JOURNAL_STREAM", streamOf(t, f))
	log := New(f, &lv, "auto")
	log.Debug("probe", "n", 1)
	log.Info("two\nlines")
	log.With("task", "t-1").WithGroup("g").Warn("slow", "k", "v w")
	log.Error("failed", "err", "boom")
	New(f, &lv, "json").Info("asked for json")
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	want := "<7>DBG probe n=1\n<6>INF two\\nlines\n<4>WRN slow task=t-1 g.k=\"v w\"\n<3>ERR failed err=boom\n"
	got := string(b)
	if !strings.HasPrefix(got, want) {
		t.Errorf("journal lines\n got %q\nwant %q", got, want)
	}
	if rest := strings.TrimPrefix(got, want); !strings.HasPrefix(rest, `{"time":"`) || !strings.Contains(rest, `"msg":"asked for json"`) {
		t.Errorf("--log-format json under the journal is not JSON: %q", rest)
	}
}
