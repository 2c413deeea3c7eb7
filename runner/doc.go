// Package runner runs one task through its attempts.
//
// An Executor runs one attempt, reports what happens as Events and ends
// with an Exit. The executors live in packages of their own: runner/exec
// runs an argv (never a shell) in its own process group; runner/codex
// drives Codex's app server over JSON-RPC; runner/claude drives Claude Code
// in print mode; runner/acp drives any agent that speaks the Agent Client
// Protocol, and runner/opencode is it with OpenCode's profile; runner/cli
// holds what the CLI executors share.
//
// Runner.Run is the attempt loop. It starts the first attempt, applies every
// event to the task through the state helpers, enforces the first-event and
// whole-attempt timeouts, classifies a failure (transient, permanent, or a
// stop), asks the retry policy and the safety gate whether to try again, and
// records every decision on the attempt. It reports every phase, progress,
// log, attempt and completion to a Sink, feeds the executor's health
// tracker, and honours cancellation at any moment, a backoff wait included.
//
// The runner knows nothing of HTTP or the outbox: the daemon's Sink puts
// reports in the outbox.
package runner
