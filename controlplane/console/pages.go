package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// Page sizes and bounds of what a page reads.
const (
	tasksPerPage = 50
	// inboxMost is the most approvals the inbox lists.
	inboxMost = 500
	// eventsShown and logShown are the events and log lines a task's page
	// keeps; eventsRead the most events it reads to find them.
	eventsShown = 200
	logShown    = 500
	eventsRead  = 20000
	maxSearch   = 200
)

// head is the view every signed-in page starts from.
func (c *Console) head(ctx context.Context, s session, nav, title, stream string) view {
	n, _ := c.inboxCount(ctx)
	return view{Title: title, Nav: nav, Signed: true, CSRF: s.csrf(), Inbox: n, Stream: stream}
}

// pageError renders a page that could not be read: the backend's
// message, with its status.
func (c *Console) pageError(w http.ResponseWriter, v view, err error) {
	v.Error, v.Stream = err.Error(), ""
	c.render(w, statusOf(err), "forbidden", v)
}

// home sends a person to the inbox when an approval waits for them,
// else to the tasks.
func (c *Console) home(w http.ResponseWriter, r *http.Request, _ session) {
	if n, _ := c.inboxCount(r.Context()); n > 0 {
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/tasks", http.StatusSeeOther)
}

// taskFilter is the tasks page's filters, as its form and URL hold them.
type taskFilter struct {
	Phase, Agent, Repo, Q, After string
}

func filterOf(r *http.Request) (taskFilter, error) {
	q := r.URL.Query()
	f := taskFilter{Phase: q.Get("phase"), Agent: q.Get("agent"), Repo: q.Get("repo"), Q: strings.TrimSpace(q.Get("q")), After: q.Get("after")}
	if f.Phase != "" && !slices.Contains(state.Phases, state.Phase(f.Phase)) {
		return f, &Error{http.StatusBadRequest, fmt.Sprintf("phase %q: want one of %s", state.Ellipsize(f.Phase, 40), state.PhaseNames())}
	}
	if len(f.Q) > maxSearch {
		return f, &Error{http.StatusBadRequest, fmt.Sprintf("the search is longer than %d bytes", maxSearch)}
	}
	return f, nil
}

// query is the store's query of the page f names: newest first.
func (f taskFilter) query() store.Query {
	return store.Query{Phase: state.Phase(f.Phase), Agent: f.Agent, Repo: f.Repo, Title: f.Q, After: f.After, Limit: tasksPerPage,
		Order: api.OrderNewest}
}

// pinned reports whether the page f names keeps the tasks that need a
// person on top of its first page: unless it lists one phase alone.
func (f taskFilter) pinned() bool { return f.Phase == "" }

// values are f as a URL's query, without the cursor.
func (f taskFilter) values() url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"phase": f.Phase, "agent": f.Agent, "repo": f.Repo, "q": f.Q} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v
}

// tasksData is the tasks page.
type tasksData struct {
	Filter taskFilter
	Phases []state.Phase
	Cards  []card
	Next   string
}

// tasks serves the list of tasks: a page of cards, filtered.
func (c *Console) tasks(w http.ResponseWriter, r *http.Request, s session) {
	f, err := filterOf(r)
	stream := streamURL("tasks", "", f.values(), f.After)
	v := c.head(r.Context(), s, "tasks", "Tasks", stream)
	d := tasksData{Filter: f, Phases: state.Phases}
	v.Data = &d
	if err != nil {
		v.Error = err.Error()
		c.render(w, statusOf(err), "tasks", v)
		return
	}
	cards, next, err := c.taskCards(r.Context(), f)
	if err != nil {
		v.Error = err.Error()
		c.render(w, statusOf(err), "tasks", v)
		return
	}
	d.Cards = cards
	if next != "" {
		q := f.values()
		q.Set("after", next)
		d.Next = "/tasks?" + q.Encode()
	}
	c.render(w, http.StatusOK, "tasks", v)
}

// taskCards are the cards of the page f names, and the cursor of the
// page after it: newest first, and, unless the page lists one phase,
// the tasks that need a person on top of the first page (a question
// first, then a stop to decide on; up to a page of each), and left out
// of the pages below them.
func (c *Console) taskCards(ctx context.Context, f taskFilter) ([]card, string, error) {
	var views []api.TaskView
	if f.pinned() && f.After == "" {
		for _, p := range api.NeedsPersonPhases {
			q := f.query()
			q.Phase = p
			top, _, err := c.backend.TaskPage(ctx, q)
			if err != nil {
				return nil, "", err
			}
			views = append(views, top...)
		}
	}
	page, next, err := c.backend.TaskPage(ctx, f.query())
	if err != nil {
		return nil, "", err
	}
	for _, v := range page {
		if !f.pinned() || !api.NeedsPerson(v.Task()) {
			views = append(views, v)
		}
	}
	now := c.now()
	cards := make([]card, len(views))
	for i := range views {
		cards[i] = cardOf(&views[i], now)
	}
	return cards, next, nil
}

// streamURL is the live stream of a page.
func streamURL(view, id string, q url.Values, after string) string {
	if q == nil {
		q = url.Values{}
	}
	q.Set("view", view)
	if id != "" {
		q.Set("id", id)
	}
	if after != "" {
		q.Set("after", after)
	}
	return "/events?" + q.Encode()
}

// taskData is a task's page.
type taskData struct {
	Card     card
	Timeline []attemptRow
	Question questionSlot
	Result   *result
	Actions  actions
	Events   []eventRow
	Log      string
	Seq      int // the last event read
	Prompt   string
	Cut      string
	// Subtasks: the task's parent, and its subtasks with their phases.
	Parent   string
	Subtasks []subtaskRow
}

// questionSlot is what a task's page says of its questions: the one it
// waits on, and the last one nobody answered in time.
type questionSlot struct {
	Q       *approval
	Expired string
}

// subtaskRow is a subtask as its parent's page lists it.
type subtaskRow struct {
	ID, Title string
	Phase     state.Phase
}

// result is what a task's page shows of its end.
type result struct {
	// Phase is the task's, once it ended; empty before.
	Phase   string
	Reason  string
	Summary string
	Changes []string
	// Push says what became of the push of the task's branch;
	// PullRequest is its pull request's address.
	Push, PullRequest string
	// ID and Diff link to the task's last diff, with its stat, once an
	// attempt in a workspace reported one.
	ID, Diff string
}

// actions are the actions that apply to a task, with the session's
// CSRF token for their forms.
type actions struct {
	ID                      string
	CSRF                    string
	Cancel, Retry, Continue bool
	// Budget: the task is parked at its budget, which a person may raise.
	Budget bool
}

func actionsOf(t *state.Task, csrf string) actions {
	a := actions{ID: t.ID, CSRF: csrf, Cancel: !t.Phase.Terminal() && !t.CancelRequested, Retry: t.Phase == state.PhaseRecoverableFailed}
	switch t.Phase {
	case state.PhaseFailed, state.PhaseRecoverableFailed, state.PhaseTimedOut, state.PhaseCancelled:
		a.Continue = t.SessionAttempt() != nil
	case state.PhaseParked:
		a.Continue = true // now, not at its resumes_at
		if t.Parked != nil && t.Parked.Reason == state.ParkBudget {
			a.Continue, a.Budget = false, true // only more budget lets it go on
		}
	}
	return a
}

func resultOf(t *state.Task) *result {
	ended := t.Phase.Terminal() || t.Result != nil
	if !ended && t.Diff.Seq == 0 {
		return nil
	}
	r := &result{ID: t.ID}
	if ended {
		r.Phase, r.Reason = string(t.Phase), t.PhaseReason
	}
	if t.Result != nil {
		r.Summary = t.Result.Summary
		r.Changes = state.ChangesLines(t.Result.Changes)
		r.Push = state.PushText(t.Result.Changes)
		if c := t.Result.Changes; c != nil {
			r.PullRequest = c.PullRequest
		}
	}
	if t.Diff.Seq > 0 {
		r.Diff = diffText(t.Diff.Files, t.Diff.Insertions, t.Diff.Deletions)
	}
	return r
}

// taskParts are the parts of a task's page the live stream replaces.
func (c *Console) taskParts(v *api.TaskView, csrf string) taskData {
	t := v.Task()
	d := taskData{Card: cardOf(v, c.now()), Timeline: timelineOf(t, c.now()), Result: resultOf(t), Actions: actionsOf(t, csrf), Prompt: t.Prompt}
	if a, ok := approvalOf(v, csrf, "/tasks/"+t.ID, c.now()); ok {
		d.Question.Q = &a
	}
	if e := t.ApprovalExpired; e != nil {
		d.Question.Expired = e.ID + ": " + e.What()
	}
	if v.OutputCutLines > 0 {
		d.Cut = fmt.Sprintf("the control plane cut %d lines (%d bytes) of this task's output past its cap", v.OutputCutLines, v.OutputCutBytes)
	}
	return d
}

// task serves a task's page.
func (c *Console) task(w http.ResponseWriter, r *http.Request, s session) {
	c.taskPage(w, r, s, http.StatusOK, "")
}

// taskPage renders a task's page with status, and an action's error when
// one failed.
func (c *Console) taskPage(w http.ResponseWriter, r *http.Request, s session, status int, actionErr string) {
	id := r.PathValue("id")
	v := c.head(r.Context(), s, "tasks", "Task "+id, "")
	tv, err := c.backend.TaskView(r.Context(), id)
	if err != nil {
		c.pageError(w, v, err)
		return
	}
	d := c.taskParts(&tv, v.CSRF)
	// Subtasks: the tree around the task.
	d.Parent = tv.Parent
	for _, cid := range tv.Children {
		row := subtaskRow{ID: cid}
		if k, err := c.backend.TaskView(r.Context(), cid); err == nil {
			row.Title, row.Phase = k.Title, k.Phase
		}
		d.Subtasks = append(d.Subtasks, row)
	}
	events, lines, last, err := c.tail(r.Context(), id, 0, eventsRead)
	if err != nil {
		c.pageError(w, v, err)
		return
	}
	if len(events) > eventsShown {
		events = events[len(events)-eventsShown:]
	}
	if len(lines) > logShown {
		lines = lines[len(lines)-logShown:]
	}
	d.Events, d.Seq = events, last
	d.Log = strings.Join(lines, "\n")
	if d.Log != "" {
		d.Log += "\n"
	}
	v.Title = "Task " + state.Ellipsize(tv.Title, 60)
	v.Stream = streamURL("task", id, nil, fmt.Sprint(last))
	v.Error = actionErr
	v.Data = &d
	c.render(w, status, "task", v)
}

// tail reads a task's events after seq after, at most most of them: each
// in a line, the log lines they carry, and the last seq read.
func (c *Console) tail(ctx context.Context, id string, after, most int) ([]eventRow, []string, int, error) {
	var (
		rows  []eventRow
		lines []string
	)
	for read := 0; read < most; {
		page, more, err := c.backend.TaskEvents(ctx, id, after, min(api.MaxEventsPage, most-read))
		if err != nil {
			return nil, nil, after, err
		}
		for _, e := range page {
			rows = append(rows, eventOf(e))
			lines = append(lines, logLines(e)...)
			after = e.Seq
		}
		read += len(page)
		if !more || len(page) == 0 {
			break
		}
	}
	return rows, lines, after, nil
}

// budgetForm reads the budget form: tokens and a duration to add, either
// empty.
func budgetForm(r *http.Request) (api.BudgetRequest, error) {
	var req api.BudgetRequest
	if v := strings.TrimSpace(r.PostFormValue("add_tokens")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return req, &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("tokens to add %q: want a whole number, 0 or more", v)}
		}
		req.AddTokens = n
	}
	if v := strings.TrimSpace(r.PostFormValue("add_time")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return req, &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("time to add %q: want a duration, as 20m", v)}
		}
		req.AddTime = state.Duration(d)
	}
	return req, nil
}

// act runs a person's action on a task: cancel, retry, continue or
// reply. Done, it goes back to the task's page (or, for a reply, to the
// page the form names); refused, the task's page says why, with the
// API's status and message.
func (c *Console) act(w http.ResponseWriter, r *http.Request, s session) {
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx := r.Context()
	var err error
	back := "/tasks/" + id
	switch action {
	case "cancel":
		_, err = c.backend.CancelTask(ctx, id)
	case "retry":
		_, err = c.backend.RetryTask(ctx, id)
	case "continue":
		_, err = c.backend.ContinueTask(ctx, id)
	case "budget":
		var req api.BudgetRequest
		req, err = budgetForm(r)
		if err == nil {
			_, err = c.backend.BudgetTask(ctx, id, req)
		}
	case "reply":
		req := api.ReplyRequest{RequestID: r.PostFormValue("request_id"), Decision: api.Decision(r.PostFormValue("decision"))}
		_, err = c.backend.ReplyTask(ctx, id, req)
		if b := r.PostFormValue("back"); b != "" {
			back = safeNext(b)
		} else {
			back = "/inbox"
		}
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		c.log.Info("console: action refused", "task", id, "action", action, "err", err)
		c.taskPage(w, r, s, statusOf(err), err.Error())
		return
	}
	c.log.Info("console: action", "task", id, "action", action, "operator", s.operator)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// approvals are the tasks awaiting a person's answer, oldest first.
func (c *Console) approvals(ctx context.Context, csrf string) ([]approval, error) {
	var out []approval
	q := store.Query{Phase: state.PhaseAwaitingReply, Limit: api.MaxTasksPage}
	for len(out) < inboxMost {
		views, next, err := c.backend.TaskPage(ctx, q)
		if err != nil {
			return nil, err
		}
		for i := range views {
			if a, ok := approvalOf(&views[i], csrf, "/inbox", c.now()); ok && len(out) < inboxMost {
				out = append(out, a)
			}
		}
		if next == "" {
			break
		}
		q.After = next
	}
	return out, nil
}

// inboxCount is how many approvals wait.
func (c *Console) inboxCount(ctx context.Context) (int, error) {
	a, err := c.approvals(ctx, "")
	return len(a), err
}

// inbox serves the approvals waiting across the fleet.
func (c *Console) inbox(w http.ResponseWriter, r *http.Request, s session) {
	v := c.head(r.Context(), s, "inbox", "Inbox", streamURL("inbox", "", nil, ""))
	list, err := c.approvals(r.Context(), v.CSRF)
	if err != nil {
		c.pageError(w, v, err)
		return
	}
	v.Inbox = len(list)
	v.Data = list
	c.render(w, http.StatusOK, "inbox", v)
}

// agents serves the agents.
func (c *Console) agents(w http.ResponseWriter, r *http.Request, s session) {
	v := c.head(r.Context(), s, "agents", "Agents", streamURL("agents", "", nil, ""))
	list, err := c.agentCards(r.Context())
	if err != nil {
		c.pageError(w, v, err)
		return
	}
	v.Data = list
	c.render(w, http.StatusOK, "agents", v)
}

func (c *Console) agentCards(ctx context.Context) ([]agentCard, error) {
	views, err := c.backend.AgentViews(ctx)
	if err != nil {
		return nil, err
	}
	now := c.now()
	out := make([]agentCard, len(views))
	for i, a := range views {
		out[i] = agentOf(a, now)
	}
	return out, nil
}
