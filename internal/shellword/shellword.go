// Package shellword quotes words for a POSIX shell, so that a command the
// tools suggest to a person works when pasted as printed, and splits a
// command line into words as a shell would, without one (--executor-command).
package shellword

import "strings"

// Quote is s as one word of a POSIX shell: s itself when it holds only
// the characters paths, ids and URLs are made of, else s in single quotes.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// unsafe reports whether a shell could read r as more than a letter of a
// word.
func unsafe(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
}
