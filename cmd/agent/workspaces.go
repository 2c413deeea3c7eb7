package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/workspace"
)

func newWorkspacesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workspaces",
		Short: "List and remove the workspaces (clones) of tasks that named a repository",
		Long: `A task that names a repository the agent serves ([[repo]] in the config)
runs in a clone of its own, WORK_DIR/TASK_ID, on the branch agent/TASK_ID;
the agent brings that branch back to the repository at the end of each
attempt. Retention removes a finished task's clone and branch with the task
when nothing would be lost; one whose commits are on no other branch, or
whose clone has uncommitted changes, is kept until a person looks at it and
removes it with agent workspaces rm.

These commands read the work directory (--work-dir, else DATA_DIR/work) as
agent run's settings give it; they work while the agent runs.`,
	}
	cmd.AddCommand(newWorkspacesLsCmd(), newWorkspacesRmCmd())
	return cmd
}

// workspaceFlags are the settings the workspaces commands take.
type workspaceFlags struct{ dataDir, workDir string }

func (f *workspaceFlags) add(cmd *cobra.Command) {
	dataDirFlag(cmd, &f.dataDir) // the installed service's, when nothing names one
	agentSettings.Bind(useSettings(cmd, agentSettings), "work-dir", &f.workDir)
}

// manager reads the workspaces under the work directory. It needs no
// repository of the config: each workspace's record says where its
// repository is.
func (f *workspaceFlags) manager() (*workspace.Manager, error) {
	root := f.workDir
	if root == "" {
		root = filepath.Join(f.dataDir, "work")
	}
	return workspace.New(root, nil)
}

func newWorkspacesLsCmd() *cobra.Command {
	var (
		f      workspaceFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the tasks' workspaces, oldest first: task, repository, branch, size, and whether removing it would lose work",
		Long: `ls lists every task's workspace with its size on disk and its state:

  clean                           nothing would be lost: retention removes it
                                  with its task
  kept: 2 commits not on main     its branch (in the clone or the repository)
                                  or a ref on which a replay kept an earlier
                                  attempt's work (refs/agent/kept/TASK_ID/…)
                                  has commits on no other branch, tag or
                                  remote, and not in its base
  kept: uncommitted changes       its clone has changes no commit holds
                                  (untracked files too; ignored ones not)`,
		Example: `  agent workspaces ls
  agent workspaces ls --json | jq '.[] | select(.state != "clean")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := f.manager()
			if err != nil {
				return err
			}
			list, err := m.List(cmd.Context())
			if err != nil && len(list) == 0 {
				return err
			}
			if err != nil {
				cmd.PrintErrln("agent: workspaces ls: warning:", oneLine(err.Error()))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), taskview.WorkspaceViews(list))
			}
			return taskview.Workspaces(cmd.OutOrStdout(), list, m.Root())
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the workspaces as a JSON array: task_id, repo, branch, base, dir, branch_head (the branch in the repository, if brought back), bytes, commits (those only it holds), uncommitted, missing, kept_refs, error and state`)
	return cmd
}

func newWorkspacesRmCmd() *cobra.Command {
	var (
		f     workspaceFlags
		force bool
	)
	cmd := &cobra.Command{
		Use:   "rm TASK_ID",
		Short: "Remove a task's workspace and its branch, refusing when work would be lost unless --force",
		Long: `rm removes a finished task's clone (WORK_DIR/TASK_ID) and its branch
agent/TASK_ID in the repository (that ref alone, never what it links to),
with the refs refs/agent/kept/TASK_ID/attempt-N on which replays kept what
earlier attempts left. It refuses, saying what would be lost, when the
branch or a kept ref has commits on no other branch, tag or remote and not
in its base, or the clone has uncommitted changes: merge or push the
branch (or the kept ref), or commit what you want to keep elsewhere, then
rm again; or give --force to drop them (rm says what it dropped). The workspace of a task that has not finished is never removed.
A git worktree an earlier agent made for a task is removed the same way.`,
		Example: `  agent workspaces rm 7f3c2a
  git -C ~/src/app merge agent/7f3c2a && agent workspaces rm 7f3c2a
  agent workspaces rm 7f3c2a --force    # drops its commits and changes`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("%s takes one task id, got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := f.manager()
			if err != nil {
				return err
			}
			if err := datadir.CheckTaskEnded(f.dataDir, args[0]); err != nil {
				return err
			}
			i, err := m.Remove(cmd.Context(), args[0], force)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), taskview.Visible(i.Removed()))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&force, "force", false, "remove it even though its commits or uncommitted changes are lost with it")
	return cmd
}
