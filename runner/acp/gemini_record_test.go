package acp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
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

// After a tool's result Gemini CLI 0.61.0 records a cut stream's part as
// the model's answer: the record's answer without usage, or answers that
// used more than the prompt's answer counted (it counts the requests
// that finished alone), tell the cut; a whole turn, and what came
// before it, do not.
func TestGeminiTurnCutAfterAToolResult(t *testing.T) {
	const session = "7c1d2e3f-373c-484b-ab3f-a3ea3c2af846"
	since := time.Date(2026, 11, 28, 5, 6, 0, 0, time.UTC)
	msg := func(id, at, typ, rest string) string {
		return `{"id":"` + id + `","timestamp":"2026-11-28T05:` + at + `.000Z","type":"` + typ + `"` + rest + "}\n"
	}
	before := msg("m0", "05:00", "user", `,"content":[{"text":"An earlier turn"}]`) +
		msg("m1", "05:01", "gemini", `,"content":"Earlier.","tokens":{"input":500,"output":9}`)
	toolTurn := msg("m2", "06:01", "user", `,"content":[{"text":"Run it"}]`) +
		msg("m3", "06:02", "gemini", `,"content":"","tokens":{"input":20,"output":7}`) +
		msg("m4", "06:02", "gemini", `,"content":"","toolCalls":[{"id":"c1","name":"run_shell_command"}]`) +
		msg("m5", "06:03", "user", `,"content":[{"functionResponse":{"id":"c1"}}]`)
	for _, c := range []struct {
		name     string
		answer   string
		reported state.Usage
		cut      bool
	}{
		{"a whole turn", msg("m6", "06:04", "gemini", `,"content":"Done.","tokens":{"input":40,"output":7}`), state.Usage{InputTokens: 60, OutputTokens: 14}, false},
		{"an answer with no usage", msg("m6", "06:04", "gemini", `,"content":"Partial","tokens":null`), state.Usage{InputTokens: 20, OutputTokens: 7}, true},
		{"answers that used more than reported", msg("m6", "06:04", "gemini", `,"content":"Partial","tokens":{"input":40,"output":0}`), state.Usage{InputTokens: 20, OutputTokens: 7}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			chats := filepath.Join(home, ".gemini", "tmp", "work", "chats")
			if err := os.MkdirAll(chats, 0o700); err != nil {
				t.Fatal(err)
			}
			record := `{"sessionId":"` + session + `","projectHash":"p","kind":"main"}` + "\n" + before + toolTurn + c.answer
			if err := os.WriteFile(filepath.Join(chats, geminiRecordName(since, session)), []byte(record), 0o600); err != nil {
				t.Fatal(err)
			}
			why, err := geminiTurnCut([]string{"HOME=" + home}, session, since, c.reported)
			if err != nil {
				t.Fatal(err)
			}
			if (why != "") != c.cut {
				t.Errorf("cut %q, want cut %v", why, c.cut)
			}
		})
	}
}
