// Package workspace gives a task that names a repository a clone of its
// own, on a branch of its own, made from a base ref: it makes the clone
// before the first attempt, commits what each attempt left on the task's
// branch (Commit) and brings the branch back to the repository
// (BringBack), reports what the task changed (Changes, Diff), makes the
// clone again for a replay having kept what the attempt before left
// (Reset, on refs/agent/kept/TASK_ID/attempt-N), keeps it as it is for a
// continue, pushes the branch to the repository's remote (Push), and
// removes it only when no work would be lost.
//
// On disk, under the agent's work root ROOT:
//
//	ROOT/TASK_ID/                 the clone, on branch agent/TASK_ID: the
//	                              task's work directory, and its git
//	                              directory ROOT/TASK_ID/.git, the task's
//	                              to write; its objects borrow the
//	                              repository's (objects/info/alternates)
//	ROOT/.workspaces/TASK_ID.json what the manager knows of it (0600):
//	                              repository, base, base commit, what it
//	                              last brought back
//	ROOT/.workspaces/TASK_ID.git  the manager's view of the task's work: a
//	                              git directory of its own (config, index)
//	                              whose objects borrow the repository's and
//	                              the clone's
//
// The repository changes only when the manager brings a task's branch
// back (refs/heads/agent/TASK_ID) or keeps what a replay would drop
// (refs/agent/kept/TASK_ID/attempt-N), and the objects they need. A
// confined task writes nothing of it (Workspace.Writable is the clone
// alone).
//
// Promises:
//
//  1. Two tasks on one repository never share a file: each has its own
//     clone, git directory, index, HEAD and branch. The repository's
//     checkout is never changed.
//  2. Work is never lost, by a replay or by cleanup: Reset keeps what
//     the clone holds that the base does not (its branch, and its files
//     no commit holds, committed on top) on a ref of its own before it
//     makes the clone again; Remove refuses, with what would be lost, a
//     workspace holding commits (on its clone's refs or HEAD, on its
//     branch in the repository, on the refs replays kept, or what the
//     manager last brought back) that are on no other branch, tag or
//     remote of the repository and not in the base, or whose clone has
//     changes no commit holds (untracked files too; ignored ones do not
//     count), or that it cannot read, unless forced.
//  3. What a task wrote is data, never an instruction. Its branch is read
//     as a file (or a line of packed-refs) holding an object id: a
//     symbolic ref or anything else is refused (RefusedError), never
//     followed. Git runs on the task's work in the manager's view, never
//     with the clone's config, hooks, index or .git file; the clone's
//     objects are read only once their directory holds nothing but
//     directories and regular files and its alternates name the
//     repository's alone. The agent's commit is made in the view too (its
//     objects written to the checked clone's object directory), and what
//     it writes of the clone (the branch, the index) is a new file renamed
//     into place, never written through a link. The branch comes back by
//     a fetch from the view (file protocol only, no hooks, objects
//     checked) and update-ref --no-deref with the value last written
//     there; removal deletes that ref alone, by its inspected value. A
//     push sends the repository's branch, by its inspected commit, with
//     the person's git and config. Every git call runs with no hook, no
//     file system monitor, no external diff or text conversion and no
//     recursion into submodules, in an environment stripped of inherited
//     GIT_ variables.
//
// A git worktree an agent made before clones (its record names an admin
// directory) is listed and removed with the same care, and made a clone
// in place before its task runs again (legacy.go).
package workspace
