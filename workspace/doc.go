// Package workspace gives a task that names a repository a git worktree
// of its own, on a branch of its own, made from a base ref: it makes the
// worktree before the first attempt, resets it to the base for a replay,
// keeps it as it is for a continue, reports what the task changed, and
// removes it only when no work would be lost.
//
// On disk, under the agent's work root ROOT:
//
//	ROOT/TASK_ID/                 the worktree, on branch agent/TASK_ID
//	ROOT/.workspaces/TASK_ID.json what the manager knows of it (0600):
//	                              repository, base, base commit, git dirs
//
// The repository's own files change as git worktree add makes them:
// the branch refs/heads/agent/TASK_ID and the worktree's git directory
// COMMON/worktrees/NAME.
//
// Promises:
//
//  1. Two tasks on one repository never share a file: each has its own
//     worktree, index, HEAD and branch. The repository's checkout is
//     never changed.
//  2. Work is never lost by cleanup: Remove refuses, with what would be
//     lost, a workspace whose branch has commits on no other branch, tag
//     or remote and not in the base, or whose worktree has changes no
//     commit holds (untracked files too; ignored ones do not count),
//     unless forced.
//  3. A task may have written anything in its worktree, its .git file
//     included, and in the worktree's git directory. Every git call the
//     manager makes names the git directory, the common directory and
//     the work tree itself, so nothing is discovered from the task's
//     files; it runs with no hook, no file system monitor, no external
//     diff or text conversion and no recursion into submodules, in an
//     environment stripped of inherited GIT_ variables. A repository
//     whose worktrees would read a config file of their own
//     (extensions.worktreeConfig) is not served.
package workspace
