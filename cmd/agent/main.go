// Command agent runs tasks from a cloud control plane on this machine and
// reports them back through a durable outbox. Run `agent --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/internal/settings"
)

func main() {
	// A process started as an attempt's keeper is one, and nothing else.
	keeper.Main()
	// No other process of this user reads this one's memory, environment
	// or open files through /proc, nor traces it: a task runs as the same
	// user, and the agent holds tokens.
	undumpable()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code: 0 on success,
// 1 on failure, 2 on a usage error. Errors are one line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec) // the command said all it had to say
	}
	for _, line := range errorLines(err) {
		fmt.Fprintf(stderr, "agent: %s\n", line)
	}
	var (
		ue  usageError
		se  settings.UsageError
		sue service.UsageError
	)
	if errors.As(err, &ue) || errors.As(err, &se) || errors.As(err, &sue) || strings.HasPrefix(err.Error(), "unknown command") {
		return 2
	}
	return 1
}

// exitCode ends a command with that code and nothing more on stderr.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// exitOr is nil for 0, else the exit code as an error.
func exitOr(c exitCode) error {
	if c == 0 {
		return nil
	}
	return c
}

// usageError marks a mistake in the command line (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errorLines is what run prints of err: one line, or for a config file's
// mistakes one line each.
func errorLines(err error) []string {
	var ce settings.Errors
	if !errors.As(err, &ce) || ce.Error() != err.Error() { // wrapped: said as one line
		return []string{oneLine(err.Error())}
	}
	lines := make([]string, len(ce))
	for i, e := range ce {
		lines[i] = oneLine(e.Error())
	}
	return lines
}

// oneLine keeps an error message to one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
