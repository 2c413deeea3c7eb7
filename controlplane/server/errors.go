package server

import "fmt"

// errKind is what kind of refusal a rule's error is. The rules know no
// HTTP: the HTTP layer says each kind with its status (statusFor), and
// the console with the same.
type errKind uint8

// The kinds of refusal.
const (
	// errInvalid: the request is not well formed, or passes a bound.
	errInvalid errKind = iota + 1
	// errUnauthorized: a credential that is no longer good (a task
	// token whose task has moved on).
	errUnauthorized
	// errForbidden: the caller may not do this (another agent's task, a
	// delegation the rules refuse).
	errForbidden
	// errNotFound: no such task, agent or diff.
	errNotFound
	// errConflict: the task or agent is not in a state that allows it
	// (already ended, not awaiting a reply, changing under the request).
	errConflict
	// errGone: what the request names was good once and is no more (an
	// approval link expired or used).
	errGone
	// errUnserved: well formed, but nothing could act on it (a task for
	// a repository no agent serves).
	errUnserved
	// errUnavailable: the store failed; the request may be made again.
	errUnavailable
)

// ruleError is a request the rules refused, of a kind, said in one line
// that goes to the caller as it is.
type ruleError struct {
	kind errKind
	msg  string
}

func (e *ruleError) Error() string { return e.msg }

// invalidRequest is an errInvalid refusal.
func invalidRequest(format string, args ...any) error {
	return &ruleError{errInvalid, fmt.Sprintf(format, args...)}
}
