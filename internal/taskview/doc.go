// Package taskview is how a task is shown, defined once: the phase groups
// (which phase reads as running, waiting for a person, failed, …), the
// terminal's colours by group, a progress card's and a timeline's rows, a
// task's one-line state, the task table, tasks show's page, the inbox, the
// live board of tasks watch, the table of workspaces ls, and the commands a view suggests to a
// person as they can paste them (CommandHint). The CLI prints with it, the console
// colours its cards by its groups, and the notifications word a task's
// phase with it.
//
// It knows nothing of commands (cobra) or of HTTP: it renders tasks that
// its callers read, to writers or lines they own. Text that came from a
// task, an executor or the network goes through Visible before it reaches
// a terminal.
package taskview
