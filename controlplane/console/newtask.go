package console

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// newTaskForm is the new-task form's fields as a person typed them, kept
// to fill the form again when the control plane refuses it.
type newTaskForm struct {
	Prompt, Title, Repo, Base, Requires, MaxTokens, MaxTime string
	// NoCommit: the agent leaves each attempt's work uncommitted.
	NoCommit bool
}

// newTaskData is what the new-task page shows: the form, and the
// repositories the fleet's agents serve.
type newTaskData struct {
	Form  newTaskForm
	Repos []string
}

// newTaskPage serves the new-task form.
func (c *Console) newTaskPage(w http.ResponseWriter, r *http.Request, s session) {
	c.renderNewTask(w, r, s, http.StatusOK, newTaskForm{Repo: r.URL.Query().Get("repo")}, "")
}

// renderNewTask renders the form with f, and with why the last one was
// refused, if it was.
func (c *Console) renderNewTask(w http.ResponseWriter, r *http.Request, s session, status int, f newTaskForm, refused string) {
	v := c.head(r.Context(), s, "tasks", "New task", "")
	repos, err := c.servedRepos(r)
	if err != nil {
		c.pageError(w, v, err)
		return
	}
	v.Error, v.Data = refused, newTaskData{Form: f, Repos: repos}
	c.render(w, status, "newtask", v)
}

// servedRepos are the repositories the agents the control plane knows
// serve, sorted, each once.
func (c *Console) servedRepos(r *http.Request) ([]string, error) {
	agents, err := c.backend.AgentViews(r.Context())
	if err != nil {
		return nil, err
	}
	var repos []string
	for _, a := range agents {
		repos = append(repos, a.Repos...)
	}
	slices.Sort(repos)
	return slices.Compact(repos), nil
}

// newTask submits the form's task, as POST /v1/tasks would, and shows
// it; a refusal shows the form again with the control plane's reason.
func (c *Console) newTask(w http.ResponseWriter, r *http.Request, s session) {
	f := newTaskForm{Prompt: r.PostFormValue("prompt"), Title: strings.TrimSpace(r.PostFormValue("title")),
		Repo: r.PostFormValue("repo"), Base: strings.TrimSpace(r.PostFormValue("base")), Requires: r.PostFormValue("requires"),
		MaxTokens: strings.TrimSpace(r.PostFormValue("max_tokens")), MaxTime: strings.TrimSpace(r.PostFormValue("max_time")),
		NoCommit: r.PostFormValue("no_commit") != ""}
	req, err := f.request()
	if err != nil {
		c.renderNewTask(w, r, s, http.StatusBadRequest, f, err.Error())
		return
	}
	v, err := c.backend.CreateTask(r.Context(), req)
	if err != nil {
		c.log.Info("console: new task refused", "err", err)
		c.renderNewTask(w, r, s, statusOf(err), f, err.Error())
		return
	}
	c.log.Info("console: new task", "task", v.ID, "operator", s.operator)
	http.Redirect(w, r, "/tasks/"+v.ID, http.StatusSeeOther)
}

// request is the form as the API's request; a field that does not parse
// is refused in one line, naming it. What the control plane checks
// (the prompt, the repository and base, the requirements' keys) it
// refuses itself, as it does for the API.
func (f newTaskForm) request() (api.CreateTaskRequest, error) {
	req := api.CreateTaskRequest{Prompt: strings.ReplaceAll(f.Prompt, "\r\n", "\n"), Title: f.Title, Repo: f.Repo, Base: f.Base, NoCommit: f.NoCommit}
	for l := range strings.SplitSeq(f.Requires, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			req.Requires = append(req.Requires, state.Requirement(l))
		}
	}
	if f.MaxTokens != "" {
		n, err := strconv.ParseInt(f.MaxTokens, 10, 64)
		if err != nil || n < 0 {
			return req, &Error{Status: http.StatusBadRequest, Msg: "max tokens " + strconv.Quote(f.MaxTokens) + ": want a whole number, 0 or more"}
		}
		req.MaxTokens = n
	}
	if f.MaxTime != "" {
		d, err := time.ParseDuration(f.MaxTime)
		if err != nil || d < 0 {
			return req, &Error{Status: http.StatusBadRequest, Msg: "max time " + strconv.Quote(f.MaxTime) + ": want a duration such as 30m or 2h, 0 or more"}
		}
		req.MaxTime = state.Duration(d)
	}
	return req, nil
}
