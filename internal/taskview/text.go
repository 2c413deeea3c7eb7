package taskview

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Ago renders how long ago t was, the way a person reads it: "12s ago",
// "3m ago", "5h ago", "2d ago"; "-" for no time.
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return Age(now.Sub(t)) + " ago"
}

// Age renders a duration coarsely: "12s", "3m", "5h", "2d".
func Age(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// Dash renders an empty string as "-".
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncateMiddle shortens s to n characters, keeping both ends.
func truncateMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	half := (n - 1) / 2
	return string(r[:half]) + "…" + string(r[len(r)-(n-1-half):])
}

// Visible makes text from tasks, executors and the network safe to print
// on a terminal: control characters (escape sequences above all), bidi
// controls and invalid UTF-8 are shown as Go escapes (\x1b, \n, \u202e)
// rather than obeyed. --json output is exact and never goes through it.
func Visible(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}
