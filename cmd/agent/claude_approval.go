package main

import (
	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/runner/claude"
)

// newClaudeApprovalMCPCmd is the permission prompt tool Claude Code asks
// (runner/claude): an MCP server over stdio that Claude Code starts, in
// the attempt's confinement, and that relays each question to the agent.
func newClaudeApprovalMCPCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "claude-approval-mcp --dir DIR",
		Short: "The permission prompt tool Claude Code asks with --approval (started by Claude Code, not by people)",
		Long: `claude-approval-mcp is an MCP server over stdio with one tool, approve, that
Claude Code calls (--permission-prompt-tool) for each tool call its
permissions would have denied, when agent run has --executor claude and an
--approval other than never. It relays the call to the agent through the
attempt's directory DIR (a Unix socket and a token the agent put there), and
gives Claude Code the agent's answer. A question the agent was not there to
answer (stopped or killed while the attempt goes on) is asked again until
the agent's next start serves the socket again; once the agent has removed
the token (the attempt ended), it is declined. The agent writes the
--mcp-config that starts it; it is not meant to be run by hand.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usagef("--dir is required")
			}
			return claude.ServeMCP(cmd.InOrStdin(), cmd.OutOrStdout(), dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the attempt's directory the agent serves questions in")
	return cmd
}
