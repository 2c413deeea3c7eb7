package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
)

func TestOutboxCompact(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	r := runAgent(t, "outbox", "compact", "--data-dir", dataDir)
	if r.code != 0 || !strings.Contains(r.stdout, "3 live records kept") {
		t.Fatalf("compact: %+v", r)
	}
	r = runAgent(t, "outbox", "ls", "--json", "--data-dir", dataDir)
	var items []outbox.Item
	json.Unmarshal([]byte(r.stdout), &items)
	if len(items) != 3 || items[0].State != outbox.StateDead || items[1].Tries != 1 {
		t.Errorf("after compact: %+v", items)
	}
}

func TestOutboxCompactRefusesWhileTheAgentRuns(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	o, err := outbox.Open(outboxview.Dir(dataDir), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	r := runAgent(t, "outbox", "compact", "--data-dir", dataDir)
	wantOneLineError(t, r, 1, filepath.Join(outboxview.Dir(dataDir), outbox.LockName))
}

func TestOutboxCompactNeedsAnOutbox(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	wantOneLineError(t, runAgent(t, "outbox", "compact", "--data-dir", missing), 1, "no outbox")
}

func TestOutboxReplayNeedsAnOutbox(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("a-token-of-enough-length-0123456789"), 0o600)
	r := runAgent(t, "outbox", "replay", "--control-plane", "http://127.0.0.1:1", "--token-file", tok, "--data-dir", missing)
	wantOneLineError(t, r, 1, "no outbox")
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("replay created %s", missing)
	}
}
