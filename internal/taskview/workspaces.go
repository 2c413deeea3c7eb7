package taskview

import (
	"fmt"
	"io"

	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/workspace"
)

// WorkspaceView is a task's workspace as agent workspaces ls --json shows
// it: its record and whether removing it would lose work.
type WorkspaceView struct {
	workspace.Info
	State string `json:"state"`
}

// WorkspaceViews are the views of list, in its order.
func WorkspaceViews(list []workspace.Info) []WorkspaceView {
	views := make([]WorkspaceView, len(list))
	for i, w := range list {
		views[i] = WorkspaceView{Info: w, State: w.State()}
	}
	return views
}

// Workspaces prints one row per workspace under root and a total line.
func Workspaces(w io.Writer, list []workspace.Info, root string) error {
	if len(list) == 0 {
		fmt.Fprintf(w, "no workspaces in %s\n", root)
		return nil
	}
	tw := NewTable(w)
	fmt.Fprintln(tw, "TASK\tREPO\tBRANCH\tSIZE\tSTATE")
	var total int64
	for _, i := range list {
		total += i.Bytes
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", Visible(i.TaskID), Visible(i.Repo), Visible(i.Branch), bytesize.Tenths(i.Bytes), Visible(i.State()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "workspaces"
	if len(list) == 1 {
		noun = "workspace"
	}
	fmt.Fprintf(w, "%d %s, %s, in %s\n", len(list), noun, bytesize.Tenths(total), root)
	return nil
}
