package console

import (
	"net/http"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

// Approval is what an approval link answers (Backend.ApprovalLink): the
// task, as it waits on the question, and the link's answer.
type Approval struct {
	Task     api.TaskView
	Decision api.Decision
	Expires  time.Time
}

// approvePage is an approval link's page: the question and the one
// answer the link gives, or why the link does nothing.
type approvePage struct {
	Q        *approval
	Decision string
	Done     string // what was answered, after the POST
	Refused  string
	TaskID   string
}

// approveLink shows what an approval link answers, and a button that
// answers it. Opening it changes nothing: a link preview, a mail
// scanner or a prefetch answers nothing.
func (c *Console) approveLink(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	a, err := c.backend.ApprovalLink(r.Context(), token)
	if err != nil {
		c.renderApprove(w, statusOf(err), approvePage{Refused: err.Error()})
		return
	}
	q, ok := approvalOf(&a.Task, "", "", c.now())
	if !ok {
		c.renderApprove(w, http.StatusGone, approvePage{Refused: "the question this link answers is not waiting any more", TaskID: a.Task.ID})
		return
	}
	q.Link, q.LinkDecision = "/approve/"+token, string(a.Decision)
	c.renderApprove(w, http.StatusOK, approvePage{Q: &q, Decision: string(a.Decision), TaskID: a.Task.ID})
}

// useLink answers the question an approval link names, once, from the
// console's own page only.
func (c *Console) useLink(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !c.sameOrigin(r) {
		c.renderApprove(w, http.StatusForbidden, approvePage{Refused: errCrossSite})
		return
	}
	v, err := c.backend.UseApprovalLink(r.Context(), r.PathValue("token"))
	if err != nil {
		c.log.Info("console: an approval link refused", "err", err)
		c.renderApprove(w, statusOf(err), approvePage{Refused: err.Error()})
		return
	}
	done := "Accepted"
	if v.Reply != nil && v.Reply.Decision == api.DecisionDecline {
		done = "Declined"
	}
	c.renderApprove(w, http.StatusOK, approvePage{Done: done + ": the agent takes the answer at its next heartbeat.", TaskID: v.ID})
}

func (c *Console) renderApprove(w http.ResponseWriter, status int, p approvePage) {
	c.render(w, status, "approve", view{Title: "Approval", Nav: "inbox", Data: p})
}
