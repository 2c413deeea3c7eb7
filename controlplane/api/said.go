package api

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/edgeagent/agent/state"
)

// Text that an agent or a task chose (a hostname, a health reason, a
// question, a failure's reason) reaches people in notifications: on a
// phone's lock screen, in a chat channel. It is shown as theirs, never
// as the control plane's words: Inert writes it where it stands alone (a
// field of its own), Quoted where a line of the control plane's quotes
// it.

// Said is by's words s, as a notification carries them: Inert, cut to
// MaxSaidRunes. Nil when s says nothing.
func Said(by, s string) *NotifySaid {
	t := Inert(s, MaxSaidRunes)
	if t == "" {
		return nil
	}
	return &NotifySaid{By: by, Text: t}
}

// Inert is s on one line (each run of white space one space), with every
// rune that is not printable (a control character, a bidirectional
// override, a zero-width one) written as its escape, \x1b or \u202e
// (read, never obeyed by a terminal or a renderer), then cut to n runes
// (an ellipsis marks the cut).
func Inert(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.Join(strings.Fields(s), " ") {
		if r == ' ' || unicode.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return state.Ellipsize(b.String(), n)
}

// Quoted is s on one line in double quotes, cut to n runes within them:
// its own quotes and backslashes escaped, and every rune that is not
// printable, so that nothing in it ends the quote or passes for the
// control plane's words.
func Quoted(s string, n int) string {
	q := strconv.Quote(strings.Join(strings.Fields(s), " "))
	in := q[1 : len(q)-1]
	if r := []rune(in); len(r) > n {
		in = string(r[:max(n-1, 0)])
		// An escape cut in two: a backslash left alone at the end would
		// escape the closing quote.
		if tail := len(in) - len(strings.TrimRight(in, `\`)); tail%2 == 1 {
			in = in[:len(in)-1]
		}
		in += "…"
	}
	return `"` + in + `"`
}

// Name is an id as a line names it: as it is when it is made of letters,
// digits and . _ : @ - (64 bytes at most), else Quoted: an agent chose
// its own.
func Name(id string) string {
	if id == "" || len(id) > 64 || strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:@-", r))
	}) >= 0 {
		return Quoted(id, 64)
	}
	return id
}
