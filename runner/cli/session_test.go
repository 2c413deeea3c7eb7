package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edgeagent/agent/runner"
)

// What a CLI said before it named its session goes out after the session
// event, which says where the CLI keeps it; the same session again with
// another path says it moved; another session is not taken.
func TestBindAtSaysWhereTheSessionIs(t *testing.T) {
	var got []string
	s := NewSessionEmitter(func(ev runner.Event) {
		got = append(got, fmt.Sprintf("%s %s %s %s", ev.Type, ev.SessionID, ev.SessionPath, ev.Message))
	}, "cli", 7)
	s.Send(runner.Event{Type: runner.EventLog, Message: "early"})
	s.BindAt("s-1", "/state/s-1.jsonl")
	s.Send(runner.Event{Type: runner.EventLog, Message: "late"})
	s.BindAt("s-1", "/state/s-1.jsonl") // the same: nothing new
	s.BindAt("s-2", "/state/s-2.jsonl") // another session: not taken
	s.BindAt("s-1", "/moved/s-1.jsonl") // moved
	s.Close()
	want := []string{"session s-1 /state/s-1.jsonl ", "log s-1  early", "log s-1  late", "session s-1 /moved/s-1.jsonl "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("emitted\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if id, path := s.Session(); id != "s-1" || path != "/moved/s-1.jsonl" {
		t.Errorf("Session() = %s, %s", id, path)
	}
}

// A CLI that never names its session gets the stand-in, with no path: it
// cannot be continued.
func TestAStandInSessionHasNoPath(t *testing.T) {
	var got []runner.Event
	s := NewSessionEmitter(func(ev runner.Event) { got = append(got, ev) }, "cli", 7)
	s.Send(runner.Event{Type: runner.EventError, Message: "lost"})
	s.Close()
	if len(got) != 2 || got[0].Type != runner.EventSession || got[0].SessionID != "cli-7" || got[0].SessionPath != "" || got[1].SessionID != "cli-7" {
		t.Errorf("emitted %+v", got)
	}
}
