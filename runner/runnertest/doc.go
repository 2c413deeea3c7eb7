// Package runnertest drives tasks through a runner.Runner for the tests of
// the runner and of its executors: a Sink that records every report, a
// fixture that runs one task to its end and checks its invariants, and the
// helpers that run the real Codex and Claude Code CLIs (pinned, from make
// tools) against the mock model on loopback.
//
// Tests that use it start their binary as a keeper (keeper.Main in
// TestMain): attempts run under one.
package runnertest
