package state

import "fmt"

// Checkout is what the agent found of the person's checkout of a task's
// repository when it made the task's workspace, reported when the
// checkout held changes no commit holds (or could not be read): the task
// starts from the commit its base named then, and does not see them.
type Checkout struct {
	// Repo is the repository's name; Base the ref the task starts from
	// and BaseCommit the commit it named.
	Repo       string `json:"repo"`
	Base       string `json:"base"`
	BaseCommit string `json:"base_commit"`
	// Changed counts the tracked files changed, staged or not (a
	// conflict, a removal and a rename each count one); Untracked the
	// files git does not track and does not ignore (a new directory
	// counts one).
	Changed   int `json:"changed,omitempty"`
	Untracked int `json:"untracked,omitempty"`
	// Unread, when set, says why the checkout's status could not be
	// read: whether it holds changes is not known.
	Unread string `json:"unread,omitempty"`
}

// CheckoutText says what c means for the task, in a line: "the checkout
// of app has uncommitted changes (2 files changed, 1 untracked); this
// task starts from main at 3f2a1c9 and does not see them".
func CheckoutText(c *Checkout) string {
	if c == nil {
		return ""
	}
	from := c.Base
	if from == "" {
		from = "HEAD"
	}
	if c.BaseCommit != "" {
		from += " at " + shortSHA(c.BaseCommit)
	}
	if c.Unread != "" {
		return fmt.Sprintf("the agent could not tell whether the checkout of %s has uncommitted changes (%s); this task starts from %s and sees none of them", c.Repo, c.Unread, from)
	}
	what := ""
	switch {
	case c.Changed > 0 && c.Untracked > 0:
		what = fmt.Sprintf("%s changed, %d untracked", fileCount(c.Changed), c.Untracked)
	case c.Changed > 0:
		what = fileCount(c.Changed) + " changed"
	default:
		what = fileCount(c.Untracked) + " untracked"
	}
	return fmt.Sprintf("the checkout of %s has uncommitted changes (%s); this task starts from %s and does not see them", c.Repo, what, from)
}

// CheckoutOf is what the agent found of t's repository's checkout when it
// made t's workspace: the note of the first attempt that carries one;
// nil when the checkout was clean (or the task has no workspace).
func CheckoutOf(t *Task) *Checkout {
	for i := range t.Attempts {
		if c := t.Attempts[i].Checkout; c != nil {
			return c
		}
	}
	return nil
}

func fileCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
