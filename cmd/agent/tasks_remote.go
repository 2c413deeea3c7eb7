package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// cpFlags are the settings a command reaches the control plane with: its
// URL, the token file (else AGENT_TOKEN) and --insecure. submit, tasks
// reply, cancel, retry and every --remote form share them.
type cpFlags struct {
	url, tokenFile string
	// operatorTokenFile is the person's token file, over tokenFile
	// (which agent run reads for the registration secret) unless
	// --token-file is on the command line.
	operatorTokenFile string
	insecure          bool
	flags             *pflag.FlagSet
}

// add makes cmd take the control plane settings.
func (f *cpFlags) add(cmd *cobra.Command) {
	controlPlaneFlags(cmd, &f.url, &f.tokenFile, &f.insecure)
	agentSettings.bind(cmd.Flags(), "operator-token-file", &f.operatorTokenFile)
	f.flags = cmd.Flags()
}

// file is the token file a person's command reads: --token-file given on
// the command line, else operator-token-file, else token-file.
func (f *cpFlags) file() string {
	if f.operatorTokenFile == "" || f.flags != nil && f.flags.Changed("token-file") {
		return f.tokenFile
	}
	return f.operatorTokenFile
}

// client is a client of the control plane the flags name. The token is
// read here and never shows in an error.
func (f *cpFlags) client() (*controlplane.Client, error) {
	if f.url == "" {
		return nil, usagef("--control-plane is required (or control-plane in the config file, or AGENT_CONTROL_PLANE)")
	}
	token, err := readToken(f.file())
	if err != nil {
		return nil, err
	}
	return controlplane.NewClient(f.url, token, controlplane.ClientOptions{Insecure: f.insecure, UserAgent: "agent/" + agentVersion()})
}

// sourceFlags choose where a tasks command reads tasks: the data directory
// (the default; read without taking the agent's lock, so it works while
// the agent runs) or, with --remote, the control plane.
type sourceFlags struct {
	dataDir string
	remote  bool
	cp      cpFlags
}

// add makes cmd take --data-dir, --remote and the control plane settings.
func (f *sourceFlags) add(cmd *cobra.Command) {
	dataDirFlag(cmd, &f.dataDir)
	cmd.Flags().BoolVar(&f.remote, "remote", false, "read the control plane (--control-plane, --token-file) instead of the data directory")
	f.cp.add(cmd)
}

// source is where to read tasks.
func (f *sourceFlags) source() (taskSource, error) {
	if !f.remote {
		return localSource{dataDir: f.dataDir}, nil
	}
	c, err := f.cp.client()
	if err != nil {
		return nil, err
	}
	return remoteSource{c}, nil
}

// taskSource is where the tasks commands read tasks.
type taskSource interface {
	// Tasks lists the tasks f selects, oldest first, at most limit of
	// them (0: all). A non-nil list with an error is a partial answer
	// (some task files could not be read).
	Tasks(ctx context.Context, f api.TaskFilter, limit int) ([]*state.Task, error)
	// Task reads one task; an unknown one is errNoTask.
	Task(ctx context.Context, id string) (*state.Task, error)
	// Transient reports whether a failed read may succeed if tried again.
	Transient(err error) bool
	// String says where the tasks are, for people.
	String() string
	// KnowsQueue reports whether the source sees the tasks waiting to be
	// claimed: the control plane does; an agent's data directory holds
	// only the tasks it claimed.
	KnowsQueue() bool
}

// errNoTask: the source does not know the task (yet).
var errNoTask = errors.New("no such task")

// noTaskError says where a task is not; it is errNoTask.
type noTaskError string

func (e noTaskError) Error() string        { return string(e) }
func (e noTaskError) Is(target error) bool { return target == errNoTask }

// localSource reads the agent's data directory.
type localSource struct{ dataDir string }

func (s localSource) Tasks(_ context.Context, f api.TaskFilter, limit int) ([]*state.Task, error) {
	tasks, err := datadir.LoadTasks(s.dataDir)
	tasks = slices.DeleteFunc(tasks, func(t *state.Task) bool { return !f.Match(t) })
	if limit > 0 && len(tasks) > limit {
		tasks = tasks[:limit]
	}
	return tasks, err
}

func (s localSource) Task(_ context.Context, id string) (*state.Task, error) {
	t, err := datadir.LoadTask(s.dataDir, id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noTaskError(err.Error()) // not there yet, maybe: transient
	}
	return t, err
}

// Transient: a local read that failed fails again, but for a task not
// there yet.
func (s localSource) Transient(err error) bool { return errors.Is(err, errNoTask) }

func (s localSource) String() string { return s.dataDir }

func (localSource) KnowsQueue() bool { return false }

// remoteSource reads the control plane.
type remoteSource struct{ c *controlplane.Client }

// Tasks asks for one page after another, until limit.
func (s remoteSource) Tasks(ctx context.Context, f api.TaskFilter, limit int) ([]*state.Task, error) {
	return s.tasksIn(ctx, api.OrderOldest, f, limit, nil)
}

// tasksIn asks for one page after another in order o, until limit,
// leaving out the tasks skip names.
func (s remoteSource) tasksIn(ctx context.Context, o api.TaskOrder, f api.TaskFilter, limit int, skip map[string]bool) ([]*state.Task, error) {
	tasks, after := []*state.Task{}, ""
	for {
		size := api.MaxTasksPage
		if limit > 0 {
			size = min(size, limit-len(tasks)+len(skip))
		}
		views, next, err := s.c.TasksIn(ctx, o, f, after, size)
		if err != nil {
			return nil, err
		}
		for i := range views {
			if !skip[views[i].ID] && (limit == 0 || len(tasks) < limit) {
				tasks = append(tasks, views[i].Task())
			}
		}
		if next == "" || next == after || limit > 0 && len(tasks) >= limit {
			return tasks, nil
		}
		after = next
	}
}

func (s remoteSource) Task(ctx context.Context, id string) (*state.Task, error) {
	v, err := s.c.Task(ctx, id)
	if ae := (*controlplane.APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, noTaskError(fmt.Sprintf("no task %s at %s", taskview.Visible(id), s.c.URL()))
	}
	if err != nil {
		return nil, err
	}
	return v.Task(), nil
}

// Transient: the network and the control plane's 5xx pass.
func (s remoteSource) Transient(err error) bool {
	return !errors.Is(err, errNoTask) && controlplane.Transient(err)
}

func (s remoteSource) String() string { return s.c.URL() }

func (remoteSource) KnowsQueue() bool { return true }

// viewOf is a task as the control plane shows it, with its progress card.
func viewOf(t *state.Task) api.TaskView { return api.ViewOf(t) }

// taskIDArg accepts exactly one argument, the task's id.
func taskIDArg(usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("give one task id: agent tasks %s", usage)
		}
		return nil
	}
}
