// Package subtask is what a running task's executor has for subtasks of
// its own task (agent subtask, docs/subtasks.md): the task's credential
// from the environment the agent gave it, the subtasks to wait for, and
// what the control plane's delegation rules let the task submit; and the
// rules themselves, as a control plane reads them from its config file. The
// token reaches only the control plane; it never shows in an error.
package subtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// EnvTaskID names the task a task token belongs to, in its executor's
// environment.
const EnvTaskID = "AGENT_TASK_ID"

// InTask is a client with a task's token, and the task's id.
type InTask struct {
	Client *controlplane.Client
	TaskID string
}

// ErrOutsideTask: no task token in the environment.
var ErrOutsideTask = errors.New("no task token here (" + api.EnvTaskToken + " is not set): agent subtask runs inside a task the agent runs, whose executor it gives the token")

// FromEnv reads the task's credential from the environment getenv reads;
// userAgent names the client to the control plane.
func FromEnv(getenv func(string) string, userAgent string) (InTask, error) {
	tok, url, id := getenv(api.EnvTaskToken), getenv(api.EnvControlPlane), getenv(EnvTaskID)
	switch {
	case strings.TrimSpace(tok) == "":
		return InTask{}, ErrOutsideTask
	case url == "":
		return InTask{}, fmt.Errorf("%s is not set: the agent names the control plane with the task token", api.EnvControlPlane)
	case id == "":
		return InTask{}, errors.New(EnvTaskID + " is not set: the agent names the task with the task token")
	}
	insecure, _ := strconv.ParseBool(getenv("AGENT_INSECURE"))
	c, err := controlplane.NewClient(url, tok, controlplane.ClientOptions{Insecure: insecure, UserAgent: userAgent})
	if err != nil {
		return InTask{}, err
	}
	return InTask{Client: c, TaskID: id}, nil
}

// Wait follows the subtasks ids (every subtask of the task, in the order
// it submitted them, when none are named) until each has ended, or timeout
// (0: none) passes first: a taskfollow.TimeoutError then, with those ended
// so far. It returns the ids waited for and the ended subtasks by id; each
// retry a subtask schedules meanwhile is said on remind.
func (in InTask) Wait(ctx context.Context, ids []string, timeout time.Duration, remind io.Writer) ([]string, map[string]*state.Task, error) {
	if len(ids) == 0 {
		kids, err := in.Client.Subtasks(ctx, in.TaskID)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range kids {
			ids = append(ids, k.ID)
		}
	}
	ctx, cancel := taskfollow.Bound(ctx, timeout, strings.Join(ids, ", "))
	defer cancel()
	done, err := taskfollow.Subtasks(ctx, tasksource.Remote{Client: in.Client}, ids, remind)
	return ids, done, taskfollow.Ended(ctx, err)
}

// Ended is the subtasks ids a wait saw end (done), in the order waited
// for, and how many of them did not complete.
func Ended(ids []string, done map[string]*state.Task) (ended []*state.Task, failed int) {
	for _, id := range ids {
		t := done[id]
		if t.Phase != state.PhaseCompleted {
			failed++
		}
		ended = append(ended, t)
	}
	return ended, failed
}

// Views are tasks as the control plane shows them (subtask wait --json):
// nil for none.
func Views(tasks []*state.Task) []api.TaskView {
	var views []api.TaskView
	for _, t := range tasks {
		views = append(views, api.ViewOf(t))
	}
	return views
}

// Report says on out what the subtasks ids a wait saw end (done) came
// to, in the order waited for (subtask wait): a JSON array of their views,
// or each one's phase, result and attempt timeline as of now. It fails
// when any of them did not complete.
func Report(out io.Writer, ids []string, done map[string]*state.Task, asJSON bool, now time.Time) error {
	ended, failed := Ended(ids, done)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(Views(ended)); err != nil {
			return err
		}
	} else {
		for _, t := range ended {
			taskview.SubtaskEnd(out, taskview.PaletteFor(out), t, now)
		}
	}
	if failed > 0 {
		return fmt.Errorf("subtask wait: %d of %d subtasks did not complete", failed, len(ids))
	}
	return nil
}

// Subtasks are the task's subtasks, in the order it submitted them: as
// the control plane shows them, and as tasks.
func (in InTask) Subtasks(ctx context.Context) ([]api.TaskView, []*state.Task, error) {
	kids, err := in.Client.Subtasks(ctx, in.TaskID)
	if err != nil {
		return nil, nil, err
	}
	tasks := make([]*state.Task, len(kids))
	for i := range kids {
		tasks[i] = kids[i].Task()
	}
	return kids, tasks, nil
}

// Cancel cancels subtask id, and every subtask under it, and says what
// came of it: cancelled, or the cancel requested of its agent.
func (in InTask) Cancel(ctx context.Context, id string) (string, error) {
	v, err := in.Client.CancelTask(ctx, id)
	if err != nil {
		return "", err
	}
	if v.Phase == state.PhaseCancelled {
		return "cancelled", nil
	}
	return "cancel requested (its agent stops it)", nil
}

// Allowed is what the task may delegate to, as subtask allowed --json
// prints it.
type Allowed struct {
	TaskID     string            `json:"task_id"`
	Type       string            `json:"type"`
	Depth      int               `json:"depth"`
	Submitted  int               `json:"submitted"`
	Delegation *state.Delegation `json:"delegation"`
	// Lines say it for people, a kind of subtask a line.
	Lines []string `json:"-"`
}

// Print says a for people: the task, and a line for each kind of subtask
// it may submit.
func (a Allowed) Print(w io.Writer) {
	fmt.Fprintf(w, "task %s (type %s, depth %d) may delegate to:\n", taskview.Visible(a.TaskID), taskview.Visible(a.Type), a.Depth)
	for _, l := range a.Lines {
		fmt.Fprintf(w, "  %s\n", taskview.Visible(l))
	}
}

// Allowed asks the control plane what the task may delegate to.
func (in InTask) Allowed(ctx context.Context) (Allowed, error) {
	v, err := in.Client.Task(ctx, in.TaskID)
	if err != nil {
		return Allowed{}, err
	}
	if v.Delegation == nil {
		return Allowed{}, errors.New("the control plane does not say what its tasks may delegate to (one from before it listed it)")
	}
	return Allowed{TaskID: v.ID, Type: state.TypeOf(v.Labels), Depth: v.Depth, Submitted: len(v.Children),
		Delegation: v.Delegation, Lines: state.DelegationLines(v.Task())}, nil
}

// DelegateRules reads the control plane's delegation rules from its
// config file's [[delegate]] tables. Each mistake is one line naming the
// file and line.
func DelegateRules(r *settings.Resolved) ([]server.DelegateRule, error) {
	tables, file := r.Tables("delegate")
	var rules []server.DelegateRule
	for _, tab := range tables {
		rule := server.DelegateRule{MaxDepth: tab.Num("max-depth"), MaxChildren: tab.Num("max-children")}
		for _, side := range []struct {
			key string
			to  *map[string]string
		}{{"parent", &rule.Parent}, {"child", &rule.Child}} {
			labels, err := api.ParseLabels(tab.List(side.key))
			if err != nil {
				return nil, settings.FileError(file, tab.Line(side.key), "[[delegate]] %s: %v", side.key, err)
			}
			*side.to = labels
		}
		rules = append(rules, rule)
	}
	return rules, nil
}
