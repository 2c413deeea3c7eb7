package settings

import (
	"fmt"
	"strconv"
	"strings"
)

// UsageError is a mistake in what a person gave (a flag, an environment
// variable, a config file): a program exits 2 on it, so that a service
// manager does not restart it in a loop.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// FileError is a mistake in a config file, said with the file and line
// ("config FILE:LINE: …"; no line when line is 0).
func FileError(path string, line int, format string, args ...any) error {
	where := path
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return usagef("config %s: %s", where, fmt.Sprintf(format, args...))
}

// Errors are all the mistakes found in a config file, in the file's
// order, each one line "config FILE:LINE: …" (a UsageError each). A
// program prints each on a line of its own; Error, for a log, joins them
// with "; ".
type Errors []error

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "; ")
}

func (e Errors) Unwrap() []error { return e }
