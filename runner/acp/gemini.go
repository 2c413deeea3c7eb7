package acp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// Gemini CLI 0.61.0 keeps each session in a record of its own under its
// state: STATE/tmp/PROJECT/chats/session-YYYY-MM-DDTHH-MM-ID8.jsonl, named
// by the minute (UTC) its process started the session's chat and the
// session id's first 8 characters, one JSON object a line: the session's
// metadata ({"sessionId", "projectHash", …}), its messages ({"id", "type":
// "user" or "gemini", …}), updates ({"$set": {…}}, a "messages" among them
// replacing every message before it) and rewinds ({"$rewindTo": ID}). It
// finds a session to load by reading every record's sessionId, whatever
// the file's name.

// geminiRecordMinute is how a record's name says its minute.
const geminiRecordMinute = "2006-01-02T15-04"

// geminiRecords are the records Gemini CLI keeps session in, under the
// state its environment names.
func geminiRecords(env []string, session string) []string {
	if len(session) < 8 || strings.ContainsAny(session[:8], `*?[]\/`) {
		return nil
	}
	var out []string
	for _, state := range geminiState(env) {
		if state == "" {
			continue
		}
		found, _ := filepath.Glob(filepath.Join(state, "tmp", "*", "chats", "session-*-"+session[:8]+".jsonl"))
		for _, p := range found {
			if id, err := geminiRecordSession(p); err == nil && id == session {
				out = append(out, p)
			}
		}
	}
	return out
}

// geminiState is where Gemini CLI keeps its state: GEMINI_CLI_HOME,
// else HOME, /.gemini.
func geminiState(env []string) []string {
	if h := cli.EnvValue(env, "GEMINI_CLI_HOME"); h != "" {
		return []string{filepath.Join(h, ".gemini")}
	}
	return []string{HomeDir(env, ".gemini")}
}

// openGeminiRecord opens a record to read: a regular file, not through a
// link. The attempt may write Gemini CLI's state: what it left there
// (a link, a FIFO that would block the open) is not read.
func openGeminiRecord(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// maxGeminiRecord bounds what is read of a record.
const maxGeminiRecord = 256 << 20

// geminiRecordSession is the session a record's first line names.
func geminiRecordSession(path string) (string, error) {
	f, err := openGeminiRecord(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 1<<20)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	var meta struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(line, &meta); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return meta.SessionID, nil
}

// geminiBeforeLoad readies the session's records for a new process that
// loads the session (Gemini CLI 0.61.0), before it starts:
//
//   - A record of the session that holds nothing of its conversation (the
//     session's context alone: what a process that loaded the session
//     left of its own chat) is removed. At its start Gemini CLI removes
//     every such record, and with it every record whose name ends with
//     the same 8 characters of a session id: the session's own.
//   - The record named by the current minute is renamed to an earlier
//     minute's name that no file has. The loading process starts a chat
//     of its own for the session before it reads the session's record,
//     in a record named by its own minute: in the minute the session's
//     record is named by, that is the same file, and the new chat's
//     first update (its messages: the session's context alone) replaces
//     every message the record held: the load answers "No previous
//     sessions found for this project.". Gemini CLI finds the renamed
//     record by its content, and the loading process's chat gets a file
//     of its own.
func geminiBeforeLoad(env []string, session string, now time.Time) error {
	now = now.UTC()
	var kept []string
	for _, p := range geminiRecords(env, session) {
		msgs, err := geminiReadRecord(p)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(msgs, func(m geminiMessage) bool { return m.resumable }) {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove a record of the session that holds nothing of it (which Gemini CLI would remove with the session's own at its start): %w", err)
			}
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return errors.New("it keeps nothing of the session: it takes a turn whose first model request failed out of the session's history, and a record left with nothing of the conversation is removed")
	}
	for _, p := range kept {
		if filepath.Base(p) != geminiRecordName(now, session) {
			continue
		}
		moved := false
		for back := 1; back <= 60 && !moved; back++ {
			aside := filepath.Join(filepath.Dir(p), geminiRecordName(now.Add(-time.Duration(back)*time.Minute), session))
			if _, err := os.Lstat(aside); err == nil || !errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err := os.Rename(p, aside); err != nil {
				return fmt.Errorf("its record of the session is named by this minute, where a new process's load empties it, and could not be moved aside: %w", err)
			}
			moved = true
		}
		if !moved {
			return fmt.Errorf("its record of the session %s is named by this minute, where a new process's load empties it, and no earlier name is free", p)
		}
	}
	return nil
}

// geminiRecordName is the name of the record a chat of session started
// at t gets.
func geminiRecordName(t time.Time, session string) string {
	return "session-" + t.UTC().Format(geminiRecordMinute) + "-" + session[:8] + ".jsonl"
}

// geminiTurnCut reads the session's record after a turn Gemini CLI said
// ended. Gemini CLI 0.61.0 records the model's answer once its stream
// ends with a finish reason; a stream that breaks off without one, as an
// empty or blocked answer (its InvalidStreamError), it answers with
// end_turn all the same, keeping what it streamed as if it were the
// answer. It then takes the turn out of the session's history when the
// request was the prompt's, and leaves the tool's result last when it was
// a tool's. So the turn was cut when nothing since the attempt began is
// in the record, or its last message is the user's.
//
// After a tool's result, Gemini CLI asks for no finish reason: it records
// the part as the model's answer. Its record and its answer still tell
// (seen in its source, and on the binary): it records, with a model's
// answer, the last usage its stream carried (tokens null for a stream
// that carried none, where a finished stream carries it in its last
// chunk); and its prompt's answer counts the usage of the requests whose
// stream ended with a finish reason alone. So the turn was cut, too, when
// its last recorded answer has no usage, or the record's answers used
// more than the prompt's answer reported.
func geminiTurnCut(env []string, session string, since time.Time, reported state.Usage) (string, error) {
	var (
		latest string
		at     time.Time
	)
	for _, p := range geminiRecords(env, session) {
		// A load's own chat leaves a record of the session's context
		// alone beside the session's: the one written last is the turn's.
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(at) {
			latest, at = p, fi.ModTime()
		}
	}
	if latest == "" {
		return "", fmt.Errorf("no record of session %s under %s", session, strings.Join(geminiState(env), ", "))
	}
	msgs, err := geminiReadRecord(latest)
	if err != nil {
		return "", err
	}
	var turn []geminiMessage
	for _, m := range msgs {
		// Gemini CLI stamps its records in milliseconds.
		if !m.at.Before(since.Truncate(time.Millisecond)) {
			turn = append(turn, m)
		}
	}
	const cut = "Gemini CLI ended the turn, but its record of the session holds no answer to the turn's last model request: its stream ended without a finish reason (cut short), or with nothing to record; what it streamed is not the whole answer"
	if len(turn) == 0 || turn[len(turn)-1].typ == "user" {
		return cut, nil
	}
	var (
		last     *geminiMessage
		recorded int64
	)
	for i, m := range turn {
		if m.answer {
			last = &turn[i]
			recorded += m.tokens
		}
	}
	const cutAfter = "Gemini CLI ended the turn, but the last model request's stream did not finish (cut short): "
	switch {
	case last != nil && last.noUsage:
		return cutAfter + "its record holds the answer with no usage, which a finished stream ends with; what it streamed is not the whole answer", nil
	case recorded > reported.InputTokens+reported.OutputTokens:
		return fmt.Sprintf(cutAfter+"its record's answers used %d tokens, its prompt's answer counts %d (the requests that finished); what it streamed is not the whole answer",
			recorded, reported.InputTokens+reported.OutputTokens), nil
	}
	return "", nil
}

// geminiMessage is a message of a record, as Gemini CLI reads it.
type geminiMessage struct {
	typ string
	at  time.Time
	// answer: a model's answer to a request (a gemini message that
	// records its usage); noUsage: its stream carried none; tokens: its
	// input and output tokens.
	answer, noUsage bool
	tokens          int64
	// resumable: it makes the session one Gemini CLI lists, and loads.
	resumable bool
}

// geminiLine is what geminiReadRecord reads of a record's line.
type geminiLine struct {
	geminiRecordMessage
	RewindTo *string `json:"$rewindTo"`
	Set      *struct {
		Messages *[]geminiRecordMessage `json:"messages"`
	} `json:"$set"`
}

type geminiRecordMessage struct {
	ID        *string           `json:"id"`
	Type      string            `json:"type"`
	Timestamp time.Time         `json:"timestamp"`
	Content   json.RawMessage   `json:"content"`
	ToolCalls []json.RawMessage `json:"toolCalls"`
	Thoughts  []json.RawMessage `json:"thoughts"`
	Tokens    json.RawMessage   `json:"tokens"`
}

func (m geminiRecordMessage) message() geminiMessage {
	out := geminiMessage{typ: m.Type, at: m.Timestamp}
	var text string
	other := false
	if json.Unmarshal(m.Content, &text) != nil {
		var parts []map[string]any
		_ = json.Unmarshal(m.Content, &parts)
		for _, p := range parts {
			if t, ok := p["text"].(string); ok {
				text += t
			} else {
				other = true
			}
		}
	}
	text = strings.TrimSpace(text)
	switch m.Type {
	case "user":
		out.resumable = other || text != "" && !strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "?") &&
			!strings.HasPrefix(text, "<session_context>") && !strings.HasPrefix(text, "<hook_context>")
	case "gemini":
		out.resumable = text != "" || other || len(m.ToolCalls) > 0 || len(m.Thoughts) > 0
		// A tool call's own message has no tokens at all.
		if len(m.Tokens) > 0 {
			var t struct{ Input, Output int64 }
			out.answer = true
			out.noUsage = string(m.Tokens) == "null" || json.Unmarshal(m.Tokens, &t) != nil
			out.tokens = max(t.Input, 0) + max(t.Output, 0)
		}
	}
	return out
}

// geminiReadRecord is the messages a record holds, in order, as Gemini CLI
// reads them: a message by its id, the last line for an id winning; an
// update's messages replacing all before it; a rewind dropping the
// message it names and all after it (all, for an id it does not have).
func geminiReadRecord(path string) ([]geminiMessage, error) {
	f, err := openGeminiRecord(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		order []string
		msgs  = map[string]geminiMessage{}
	)
	put := func(m geminiRecordMessage) {
		if _, ok := msgs[*m.ID]; !ok {
			order = append(order, *m.ID)
		}
		msgs[*m.ID] = m.message()
	}
	r := bufio.NewReaderSize(io.LimitReader(f, maxGeminiRecord), 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		var l geminiLine
		if len(strings.TrimSpace(string(line))) > 0 && json.Unmarshal(line, &l) == nil {
			switch {
			case l.RewindTo != nil:
				cut := slices.Index(order, *l.RewindTo)
				if cut < 0 {
					cut = 0
				}
				for _, id := range order[cut:] {
					delete(msgs, id)
				}
				order = order[:cut]
			case l.ID != nil:
				put(l.geminiRecordMessage)
			case l.Set != nil && l.Set.Messages != nil:
				order, msgs = nil, map[string]geminiMessage{}
				for _, m := range *l.Set.Messages {
					if m.ID != nil {
						put(m)
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([]geminiMessage, 0, len(order))
	for _, id := range order {
		out = append(out, msgs[id])
	}
	return out, nil
}
