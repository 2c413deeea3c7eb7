// Package state is the model that the runner, the daemon and the control
// plane share: tasks, their phases, and the timeline of their attempts.
//
// A task moves through phases:
//
//	queued → claimed → executor_starting → turn_started ⇄ awaiting_reply → completing
//
// and ends in one terminal phase: completed, failed, recoverable_failed,
// timed_out, cancelled or expired. Transitions are validated (Transition),
// and a terminal phase is final: a late completion cannot overwrite it.
//
// Each run of the executor is an Attempt. The helpers on Task keep these
// invariants, which the property tests check after every operation:
//
//   - the current attempt is the last one, and only it changes;
//   - a finalized attempt never changes again;
//   - an executor event is resolved from its session id to its attempt, and an
//     event of an attempt that is not current, or already finalized, is stale:
//     it is reported, never applied;
//   - the task's top-level fields (current_attempt_id, last_error_code,
//     next_retry_at) are a projection of the current attempt.
//
// The package also holds the watchdog rules (pure functions of a task, the
// time and the limits), the progress card and attempt timeline renderings,
// and Store, which keeps one JSON file per task.
package state
