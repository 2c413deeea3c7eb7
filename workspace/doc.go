// Package workspace gives a task that names a repository a git worktree
// of its own, on a branch of its own, made from a base ref: it makes the
// worktree before the first attempt, resets it to the base for a replay,
// keeps it as it is for a continue, reports what the task changed, and
// removes it only when no work would be lost.
package workspace

// Repo is a repository the agent serves: a [[repo]] table of its config.
type Repo struct {
	// Name is what tasks call it (agent submit --repo NAME).
	Name string `json:"name"`
	// Path is the repository's checkout on this machine.
	Path string `json:"path"`
}
