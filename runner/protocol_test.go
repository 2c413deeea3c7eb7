package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/runnertest"
)

// fakeBin writes an executable shell script standing in for a CLI that
// breaks its protocol.
func fakeBin(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-cli")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// A CLI that breaks the protocol fails its attempt with a protocol error
// (transient, the executor degraded), and never panics the agent.
func TestBrokenProtocolIsAProtocolError(t *testing.T) {
	for _, c := range []struct {
		name, script string
		claude       bool
		want         string
	}{
		{"codex: not JSON", `read line; echo 'this is not json'; sleep 30`, false, "not a protocol message"},
		{"codex: JSON that is not a message", `read line; echo '{"hello":1}'; sleep 30`, false, "not a protocol message"},
		{"codex: exits before the turn", `read line; exit 0`, false, "before the turn completed"},
		{"codex: refuses initialize", `read line; echo '{"id":1,"error":{"code":-1,"message":"nope"}}'; sleep 30`, false, "refused initialize"},
		{"claude: not JSON", `echo 'garbage'; sleep 30`, true, "not stream-json"},
		{"claude: no result line", `echo '{"type":"system","subtype":"init","session_id":"s"}'; exit 0`, true, "without a result line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var exe runner.Executor
			var err error
			if c.claude {
				exe, err = claude.New(claude.Config{Base: cli.Base{Bin: fakeBin(t, c.script), Grace: 200 * time.Millisecond}})
			} else {
				exe, err = codex.New(codex.Config{Base: cli.Base{Bin: fakeBin(t, c.script), Grace: 200 * time.Millisecond}})
			}
			if err != nil {
				t.Fatal(err)
			}
			f := runnertest.NewFixture(t, exe, "hello")
			f.Runner.Policy.MaxAttempts = 1
			f.Run(t, context.Background())
			a := f.Task.Attempts[0]
			if a.Error == nil || a.Error.Code != "protocol_error" || !strings.Contains(a.Error.Message, c.want) {
				t.Fatalf("attempt error %+v, want protocol_error with %q", a.Error, c.want)
			}
			if a.Retry == nil || !a.Retry.TechnicallyRetryable {
				t.Errorf("a protocol error is transient: retry decision %+v", a.Retry)
			}
			if g := f.Health.Snapshot().Grade; g != "degraded" {
				t.Errorf("health %s, want degraded", g)
			}
		})
	}
}
