package acp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The attempt may write Gemini CLI's state, so what it left among the
// session's records is data: a link and a FIFO named as the session's
// records are neither read nor moved (a FIFO's open would block the
// agent), and the session's own record, named by the current minute, is
// moved aside to the first earlier minute's name no file has.
func TestGeminiRecordsLeftByTheAttemptAreNotRead(t *testing.T) {
	const session = "0453c21c-373c-484b-ab3f-a3ea3c2af846"
	home := t.TempDir()
	chats := filepath.Join(home, ".gemini", "tmp", "work", "chats")
	if err := os.MkdirAll(chats, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 2, 4, 30, 0, time.UTC)
	record := `{"sessionId":"` + session + `","projectHash":"p","kind":"main"}` + "\n" +
		`{"id":"m1","timestamp":"2026-11-28T02:04:01.000Z","type":"user","content":[{"text":"Run it"}]}` + "\n"
	own := filepath.Join(chats, geminiRecordName(now, session))
	if err := os.WriteFile(own, []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(chats, geminiRecordName(now.Add(-time.Minute), session))
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A record of the session's context alone would be removed; through
	// a link, it is not the session's.
	target := filepath.Join(t.TempDir(), "elsewhere.jsonl")
	if err := os.WriteFile(target, []byte(`{"sessionId":"`+session+`","projectHash":"p"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(chats, geminiRecordName(now.Add(time.Minute), session))
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}

	if err := geminiBeforeLoad([]string{"HOME=" + home}, session, now); err != nil {
		t.Fatal(err)
	}
	aside := filepath.Join(chats, geminiRecordName(now.Add(-2*time.Minute), session))
	if b, err := os.ReadFile(aside); err != nil || string(b) != record {
		t.Errorf("the session's record was not moved to %s: %q, %v", aside, b, err)
	}
	if _, err := os.Lstat(own); err == nil {
		t.Errorf("the session's record is still named by the current minute")
	}
	for _, p := range []string{fifo, link, target} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, left by the attempt, is gone: %v", p, err)
		}
	}
}
