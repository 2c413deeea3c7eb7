package state

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The bounds of what an approval request and a denied call carry: a
// question travels in one outbox record and is shown on a phone, so what
// a CLI sent (a command, a diff, a tool's input) is cut, and the cut
// said.
const (
	// MaxApprovalDiff bounds the diff a file change request shows.
	MaxApprovalDiff = 64 << 10
	// MaxApprovalText bounds a command, a reason, a directory, each path,
	// and a tool's input.
	MaxApprovalText = 8 << 10
	// MaxApprovalPaths bounds the paths a request lists; PathsMore counts
	// the rest.
	MaxApprovalPaths = 100
	// MaxDeniedCalls bounds the denied calls an attempt keeps; Count
	// counts them all.
	MaxDeniedCalls = 20
	// MaxDeniedInput bounds the input kept of each denied call.
	MaxDeniedInput = 500
)

// Bound cuts what the request carries to the bounds above, marking each
// cut, so that what a CLI sent can always be reported and shown.
func (r *ApprovalRequest) Bound() {
	r.ID = Clip(r.ID, 200)
	r.Tool = Clip(r.Tool, 200)
	r.Command = Clip(r.Command, MaxApprovalText)
	r.Reason = Clip(r.Reason, MaxApprovalText)
	r.Cwd = Clip(r.Cwd, MaxApprovalText)
	r.Input = Clip(r.Input, MaxApprovalText)
	if len(r.Paths) > MaxApprovalPaths {
		r.PathsMore += len(r.Paths) - MaxApprovalPaths
		r.Paths = r.Paths[:MaxApprovalPaths]
	}
	for i, p := range r.Paths {
		r.Paths[i] = Clip(p, MaxApprovalText)
	}
	if d, cut := CutPatch(r.Diff, MaxApprovalDiff); cut {
		r.Diff, r.DiffCut = d, true
	}
}

// Clip shortens s to at most n bytes, at a character's start, ending it
// with "…" when it had to be cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// What says what the request asks for, in a line: the command and where
// it runs, the files it changes, or the tool and its input.
func (r *ApprovalRequest) What() string {
	var what string
	switch {
	case r.Command != "":
		what = "run " + oneLine(r.Command, 200)
	case len(r.Paths) == 1 && r.PathsMore == 0:
		what = "change " + oneLine(r.Paths[0], 200)
	case len(r.Paths) > 0:
		what = fmt.Sprintf("change %d files: %s", len(r.Paths)+r.PathsMore, oneLine(strings.Join(r.Paths, ", "), 200))
	case r.Tool != "":
		what = "use " + r.Tool
		if r.Input != "" {
			what += " " + oneLine(r.Input, 200)
		}
	case r.Reason != "":
		what = oneLine(r.Reason, 200)
	default:
		what = string(r.Kind)
	}
	if r.Cwd != "" && r.Command != "" {
		what += " in " + oneLine(r.Cwd, 200)
	}
	return what
}

// oneLine is s on one line, at most n characters.
func oneLine(s string, n int) string {
	return Ellipsize(strings.Join(strings.Fields(s), " "), n)
}

// DeniedCall is a tool call an attempt's executor was refused: by a
// person, by the approval policy, by the CLI's own permissions, or
// because nobody answered in time.
type DeniedCall struct {
	// Tool is the CLI's tool (Bash, Write, shell, apply_patch, …).
	Tool string `json:"tool"`
	// Input is what the call asked, cut at MaxDeniedInput: the command,
	// the files, the tool's input.
	Input string `json:"input,omitempty"`
	// Why says who refused it: "declined by a person", "no answer
	// within 1h0m0s", "declined by the approval policy", "not allowed by
	// Claude Code's permissions", …
	Why string    `json:"why,omitempty"`
	At  time.Time `json:"at,omitzero"`
}

// Denied counts the tool calls an attempt was refused and keeps the
// first MaxDeniedCalls of them.
type Denied struct {
	Count int          `json:"count"`
	Calls []DeniedCall `json:"calls,omitempty"`
}

// Deny records a tool call refused in the current, open attempt.
func (t *Task) Deny(attemptID string, d DeniedCall) error {
	a, err := t.current(attemptID)
	if err != nil {
		return err
	}
	d.Tool = Clip(d.Tool, 200)
	d.Input = Clip(d.Input, MaxDeniedInput)
	d.Why = Clip(d.Why, 200)
	a.Denied.Count++
	if len(a.Denied.Calls) < MaxDeniedCalls {
		a.Denied.Calls = append(a.Denied.Calls, d)
	}
	if !d.At.IsZero() {
		t.UpdatedAt = d.At
	}
	t.project()
	return nil
}

// deniedCount is how many tool calls the task's attempts were refused.
func (t *Task) deniedCount() int {
	n := 0
	for _, a := range t.Attempts {
		n += a.Denied.Count
	}
	return n
}

// DeniedText says how many tool calls were denied, "" for none: "1 tool
// call denied", "3 tool calls denied".
func DeniedText(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "1 tool call denied"
	}
	return fmt.Sprintf("%d tool calls denied", n)
}

// DeniedLines says each denied call of the task's attempts, one a line,
// oldest first, for a person: "Bash echo hi > f (declined by a person)";
// the calls an attempt counted but did not keep are said as a number.
func DeniedLines(t *Task) []string {
	var lines []string
	for _, a := range t.Attempts {
		for _, d := range a.Denied.Calls {
			l := strings.TrimSpace(d.Tool + " " + oneLine(d.Input, 120))
			if d.Why != "" {
				l += " (" + d.Why + ")"
			}
			if len(t.Attempts) > 1 {
				l = fmt.Sprintf("attempt %d: %s", a.Number, l)
			}
			lines = append(lines, l)
		}
		if more := a.Denied.Count - len(a.Denied.Calls); more > 0 {
			lines = append(lines, fmt.Sprintf("attempt %d: and %d more", a.Number, more))
		}
	}
	return lines
}

// clone is a copy of r that shares nothing, nil for nil.
func (r *ApprovalRequest) clone() *ApprovalRequest {
	if r == nil {
		return nil
	}
	c := *r
	c.Paths = slices.Clone(r.Paths)
	return &c
}
