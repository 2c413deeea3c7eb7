package utc

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

func TestNowIsUTC(t *testing.T) {
	if loc := Now().Location(); loc != time.UTC {
		t.Fatalf("Now() in %v", loc)
	}
}

func TestLogTimeWritesUTC(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: LogTime}))
	tokyo := time.FixedZone("JST", 9*3600)
	r := slog.NewRecord(time.Date(2026, 11, 23, 16, 0, 0, 0, tokyo), slog.LevelInfo, "hi", 0)
	r.AddAttrs(slog.Time("at", time.Date(2026, 11, 23, 16, 0, 0, 0, tokyo)))
	if err := log.Handler().Handle(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["time"] != "2026-11-23T07:00:00Z" {
		t.Errorf("time = %q, want UTC", got["time"])
	}
	if got["at"] != "2026-11-23T16:00:00+09:00" {
		t.Errorf("an attribute's time was changed: %q", got["at"])
	}
}
