package main

import (
	"os"

	"github.com/edgeagent/agent/runner/sample"
	"github.com/spf13/cobra"
)

func newSampleExecutorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sample-executor",
		Short: "A built-in executor that behaves like an AI coding CLI (for the demo and tests)",
		Long: `sample-executor reads a task as one JSON line on stdin and writes events as
JSON lines on stdout, like an AI coding CLI driven by the exec executor. It
follows directives in the task's prompt, one per line:

  @progress N        N progress events with rising percent
  @sleep DURATION    wait (Go duration syntax)
  @wait-file PATH    wait until PATH exists (a test paces a task with it)
  @output TEXT       visible output
  @tool NAME         a tool call: input, call, result
  @side-effect TEXT  a side effect
  @fail CODE [TIMES] fail with CODE on the first TIMES attempts (default 1)
  @exit N            exit with code N and no result
  @hang              never answer
  @close-stdout      close stdout and go on running for a while
  @flood N           write N log lines as fast as it can
  @ignore-sigterm    ignore SIGTERM
  @spawn-child       start a grandchild that sleeps
  @subtask PROMPT    submit a subtask with agent subtask submit (\n in
                     PROMPT is a new line; docs/subtasks.md)
  @wait-subtasks     wait for them with agent subtask wait: their results
                     and timelines become output and the result's data
  @usage N           N more tokens used: a usage event with the attempt's total
  @busy DURATION     spin the CPU for DURATION, saying nothing (a long
                     silent build: working (silent), not hung)
  @sigstop           stop itself (SIGSTOP): hung, its process idle
  @limit DURATION    stop at a usage limit that resets after DURATION (an
                     error usage_limit with resets_at): the task parks,
                     then continues its session past it
  @ask COMMAND       ask before running COMMAND (an approval line; the
                     reply comes on stdin, with --approval other than
                     never) and run it with sh -c if it was accepted

Without directives it walks the phases, reports progress and output, and
returns a result.`,
		Example: `  echo '{"id":"t-1","prompt":"@progress 3\n@output hello"}' | agent sample-executor`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := sample.Main(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				os.Exit(code) // the executor's exit code is its answer, not an agent error
			}
			return nil
		},
	}
}
