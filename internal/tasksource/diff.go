package tasksource

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/workspace"
)

// Diff is task id's diff as s has it: the one the agent reported at the
// end of the task's last attempt, as the control plane keeps it (Remote),
// or its workspace's as it is now, in workDir (Local).
func Diff(ctx context.Context, s Source, workDir, id string) (api.Diff, error) {
	switch s := s.(type) {
	case Remote:
		d, err := s.Client.TaskDiff(ctx, id)
		if err != nil {
			return d, fmt.Errorf("tasks diff %s: %s", taskview.Visible(id), taskview.Visible(err.Error()))
		}
		return d, nil
	case Local:
		return s.Diff(ctx, workDir, id)
	}
	return api.Diff{}, fmt.Errorf("%s keeps no diffs", s)
}

// Diff is the diff of task id's workspace as it is now, in workDir (""
// for the data directory's work/), shaped as the control plane answers
// GET /v1/tasks/ID/diff.
func (s Local) Diff(ctx context.Context, workDir, id string) (api.Diff, error) {
	root := workDir
	if root == "" {
		root = filepath.Join(s.DataDir, "work")
	}
	m, err := workspace.New(root, nil)
	if err != nil {
		return api.Diff{}, err
	}
	ev, err := m.Diff(ctx, id)
	if errors.Is(err, workspace.ErrNoWorkspace) {
		return api.Diff{}, fmt.Errorf("task %s has no workspace in %s: it names no repository, or retention removed it; --remote prints the diff the control plane keeps", taskview.Visible(id), root)
	}
	if err != nil {
		return api.Diff{}, fmt.Errorf("tasks diff %s: %s", taskview.Visible(id), taskview.Visible(err.Error()))
	}
	d := api.Diff{TaskID: id, At: time.Now().UTC(), DiffEvent: *ev}
	if t, err := datadir.LoadTask(s.DataDir, id); err == nil {
		if c := t.Current(); c != nil {
			d.Attempt = c.Number
		}
	}
	return d, nil
}
