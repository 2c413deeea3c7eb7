package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/forge"
	"github.com/edgeagent/agent/internal/utc"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// PullRequest is how the agent opens a pull (merge) request for the
// branch of a task on a repository that pushes (workspace.Repo.Push): a
// [[repo]] table's pull_request, api_url, token_env and project.
type PullRequest struct {
	Forge forge.Kind
	// API is the forge's API base URL; default forge.DefaultAPI.
	API string
	// TokenEnv names the variable of the agent's environment that holds
	// the API's token (never passed to a task); default
	// forge.DefaultTokenEnv.
	TokenEnv string
	// Project is the repository on the forge (OWNER/NAME,
	// GROUP/…/NAME); default: what the push remote's URL names.
	Project string
}

// api and tokenEnv are p's, or the forge's defaults.
func (p PullRequest) api() string      { return orDefault(p.API, forge.DefaultAPI[p.Forge]) }
func (p PullRequest) tokenEnv() string { return orDefault(p.TokenEnv, forge.DefaultTokenEnv[p.Forge]) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TokenEnvs are the variables that hold the pull requests' tokens: never
// passed to a task.
func TokenEnvs(pulls map[string]PullRequest) []string {
	var names []string
	for _, p := range pulls {
		names = append(names, p.tokenEnv())
	}
	return names
}

// Bounds on delivering a task's branch: the push (the commits may be
// many, the network slow) and the pull request's one API call.
const (
	pushTimeout = 5 * time.Minute
	pullTimeout = 45 * time.Second
)

// delivery pushes a completed task's branch and opens its pull request,
// as its repository's config asks.
type delivery struct {
	m     *workspace.Manager
	pulls map[string]PullRequest // by repository
	// link is the task's page on the control plane's console, "" when
	// its public address is not known.
	link func(taskID string) string
	// client is the forge's HTTP client; nil for forge's default.
	client *http.Client
}

// pushes reports whether the task's repository pushes.
func (d *delivery) pushes(repo string) bool {
	for _, r := range d.m.Repos() {
		if r.Name == repo {
			return r.Push != ""
		}
	}
	return false
}

// deliver pushes task t's branch, when its repository pushes and the
// branch holds commits, and opens its pull request, when the repository
// asks for one; it says what became of both in ch's push fields. A
// failure is said there (PushError), not returned: the task stays
// completed, and agent tasks push tries again.
func (d *delivery) deliver(ctx context.Context, t *state.Task, ch *state.Changes) {
	if d == nil || d.m == nil || !d.pushes(t.Repo) {
		return
	}
	if len(ch.Commits) == 0 {
		ch.PushError = "nothing to push: the task's branch holds no commit of its own"
		return
	}
	ch.PushError = ""
	pctx, cancel := context.WithTimeout(ctx, pushTimeout)
	remote, commit, err := d.m.Push(pctx, t.ID)
	cancel()
	if err != nil {
		ch.PushError = "push: " + err.Error()
		return
	}
	ch.Pushed = &state.Push{Remote: remote, Branch: ch.Branch, Commit: commit, At: utc.Now()}
	p, ok := d.pulls[t.Repo]
	if !ok {
		return
	}
	addr, err := d.open(ctx, t, ch, p, remote)
	if err != nil {
		ch.PushError = "pull request: " + err.Error()
		return
	}
	ch.PullRequest = addr
}

// open opens (or finds open) the pull request of t's branch.
func (d *delivery) open(ctx context.Context, t *state.Task, ch *state.Changes, p PullRequest, remote string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	token := strings.TrimSpace(os.Getenv(p.tokenEnv()))
	if token == "" {
		return "", fmt.Errorf("no token for the %s API: %s is not set in the agent's environment", p.Forge, p.tokenEnv())
	}
	project := p.Project
	if project == "" {
		u, err := d.m.RemoteURL(ctx, t.Repo, remote)
		if err != nil {
			return "", err
		}
		if project = forge.ProjectOf(u); project == "" {
			return "", fmt.Errorf("remote %s's URL names no project on the forge; give project = \"OWNER/NAME\" in the [[repo]] table", remote)
		}
	}
	base, err := d.m.PullBase(ctx, t.ID)
	if err != nil {
		return "", err
	}
	stat, _ := d.m.DiffStat(ctx, t.ID)
	link := ""
	if d.link != nil {
		link = d.link(t.ID)
	}
	f := forge.Forge{Kind: p.Forge, API: p.api(), Project: project, Token: token, Client: d.client}
	return f.Open(ctx, forge.Request{Head: ch.Branch, Base: base, Title: runner.Subject(t), Body: pullBody(t, ch, link, stat)})
}

// pullBody is a pull request's description: the task's summary, a link
// to it, and the diffstat of its branch.
func pullBody(t *state.Task, ch *state.Changes, link, stat string) string {
	var b strings.Builder
	if t.Result != nil && strings.TrimSpace(t.Result.Summary) != "" {
		b.WriteString(strings.TrimSpace(runner.PlainMessage(t.Result.Summary)) + "\n\n")
	}
	task := "Task " + t.ID
	if link != "" {
		task = "[" + task + "](" + link + ")"
	}
	fmt.Fprintf(&b, "%s, branch `%s` from %s.\n\n", task, ch.Branch, ch.Base)
	files := "files"
	if ch.Files == 1 {
		files = "file"
	}
	fmt.Fprintf(&b, "+%d −%d in %d %s", ch.Insertions, ch.Deletions, ch.Files, files)
	if stat != "" {
		// A path holding a fence would end the block early.
		fmt.Fprintf(&b, ":\n\n```\n%s\n```", strings.ReplaceAll(stat, "```", "` ` `"))
	}
	b.WriteString("\n")
	return b.String()
}

// taskLink is the page of task id on the console at publicURL, "" when
// publicURL is.
func taskLink(publicURL, id string) string {
	if publicURL == "" {
		return ""
	}
	return strings.TrimRight(publicURL, "/") + "/tasks/" + url.PathEscape(id)
}

// PushOptions configure PushTask: the agent's data and work directories
// and repositories as agent run has them, and how to reach the control
// plane as the agent.
type PushOptions struct {
	ControlPlane string
	// Token is the registration secret, used only when the data
	// directory holds no agent token of its own.
	Token        string
	Insecure     bool
	DataDir      string
	WorkDir      string // default DataDir/work
	Repos        []workspace.Repo
	PullRequests map[string]PullRequest
	Version      string
}

// ErrNotPushed: the push or the pull request failed again; the task says
// why (Changes.PushError).
var ErrNotPushed = errors.New("not pushed")

// PushTask tries again the push of completed task id's branch and its
// pull request, as its repository's config asks (agent tasks push): on
// the agent's machine, from its workspace and the repository, while the
// agent runs or not. It keeps what came of it with the task in the data
// directory and tells the control plane, as the agent holding the task's
// lease (the one late event a completed task takes). It returns the
// task's changes; ErrNotPushed (with what the changes say) when the push
// or the request failed, another error when the control plane was not
// told.
func PushTask(ctx context.Context, o PushOptions, id string) (*state.Changes, error) {
	layout := datadir.Layout{Dir: o.DataDir}
	store, err := state.OpenStore(layout.Tasks())
	if err != nil {
		return nil, err
	}
	t, err := store.Load(id)
	if err != nil {
		return nil, fmt.Errorf("task %s: not in the data directory %s: %w", id, o.DataDir, err)
	}
	switch {
	case t.Phase != state.PhaseCompleted:
		return nil, fmt.Errorf("task %s is %s: only a completed task's branch is pushed", id, t.Phase)
	case t.Result == nil || t.Result.Changes == nil:
		return nil, fmt.Errorf("task %s changed no repository: it has no branch to push", id)
	case t.Lease == nil:
		return nil, fmt.Errorf("task %s holds no lease: the control plane would not take its push from this agent", id)
	}
	root := o.WorkDir
	if root == "" {
		root = filepath.Join(o.DataDir, "work")
	}
	m, err := workspace.New(root, o.Repos)
	if err != nil {
		return nil, err
	}
	publicURL := ""
	if h, err := datadir.ReadHealth(o.DataDir); err == nil {
		publicURL = h.PublicURL
	}
	d := &delivery{m: m, pulls: o.PullRequests, link: func(id string) string { return taskLink(publicURL, id) }}
	if !d.pushes(t.Repo) {
		return nil, fmt.Errorf("repository %q pushes nowhere: give its [[repo]] table push = \"REMOTE\"", t.Repo)
	}
	ch := *t.Result.Changes
	d.deliver(ctx, t, &ch)
	t.Result.Changes = &ch
	if err := store.Save(t); err != nil {
		return &ch, err
	}
	if err := tellPush(ctx, o, layout, t, &ch); err != nil {
		return &ch, err
	}
	if ch.PushError != "" {
		return &ch, fmt.Errorf("%w: %s", ErrNotPushed, ch.PushError)
	}
	return &ch, nil
}

// tellPush sends the control plane what came of a push, as the agent
// whose data directory holds the task.
func tellPush(ctx context.Context, o PushOptions, layout datadir.Layout, t *state.Task, ch *state.Changes) error {
	agentID, err := layout.LoadAgentID()
	if err != nil {
		return err
	}
	client, err := agentClient(layout, o.ControlPlane, o.Token, o.Insecure, orDefault(o.Version, "dev"), agentID, nil)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(state.PushEvent{Pushed: ch.Pushed, PullRequest: ch.PullRequest, PushError: ch.PushError})
	if err != nil {
		return err
	}
	now := utc.Now()
	ev := api.Event{Key: fmt.Sprintf("%s:push:%s", t.ID, now.Format(outbox.TimeFormat)), Kind: state.EventPush, TaskID: t.ID,
		Attempt: len(t.Attempts), LeaseID: t.Lease.ID, CreatedAt: now, Payload: payload}
	res, err := client.SendEvents(ctx, agentID, []api.Event{ev})
	if err != nil {
		return fmt.Errorf("the control plane was not told: %w", err)
	}
	if r := res[0]; r.Status == api.StatusRejected {
		return fmt.Errorf("the control plane refused what came of the push: %s", r.Reason)
	}
	return nil
}
