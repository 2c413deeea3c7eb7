package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// Backend is what the console needs of the control plane: package
// server's Server.ConsoleBackend, over the server's rules. Its actions
// follow the API's rules and answer the API's errors (an *Error says the
// status).
type Backend interface {
	// Identify says whose token tok is. A token nobody holds is counted
	// against addr, as the API counts it: Identity.Wait says how long
	// the address must wait when it is over the limit.
	Identify(ctx context.Context, tok, addr string) (Identity, error)
	// SessionKey is the key that signs the sessions of the operator whose
	// OperatorID is operator (SessionKey of its token), nil when no
	// operator token has that id.
	SessionKey(operator string) []byte
	// RevokeSession keeps the session whose nonce is nonce signed out
	// until expires, when its cookie expires anyway: stored, so that
	// every replica refuses it, after every restart too.
	RevokeSession(ctx context.Context, nonce string, expires time.Time) error
	// SessionRevoked reports whether the session whose nonce is nonce
	// was signed out.
	SessionRevoked(ctx context.Context, nonce string) (bool, error)
	// TaskPage is a page of the tasks q selects, oldest first, and the
	// cursor of the next page ("" when none follows).
	TaskPage(ctx context.Context, q store.Query) ([]api.TaskView, string, error)
	// TaskView is one task.
	TaskView(ctx context.Context, id string) (api.TaskView, error)
	// TaskEvents are up to limit of a task's events after seq after,
	// oldest first; more says whether more follow.
	TaskEvents(ctx context.Context, id string, after, limit int) (events []api.StoredEvent, more bool, err error)
	// TaskDiff is a task's last diff, as GET /v1/tasks/{id}/diff.
	TaskDiff(ctx context.Context, id string) (api.Diff, error)
	// AgentViews are the agents, by id.
	AgentViews(ctx context.Context) ([]api.AgentView, error)
	// CreateTask submits a task, as POST /v1/tasks.
	CreateTask(ctx context.Context, req api.CreateTaskRequest) (api.TaskView, error)
	// CancelTask, RetryTask, ContinueTask and ReplyTask are a person's
	// actions on a task, as POST /v1/tasks/{id}/cancel, retry, continue
	// and reply.
	CancelTask(ctx context.Context, id string) (api.TaskView, error)
	RetryTask(ctx context.Context, id string) (api.TaskView, error)
	ContinueTask(ctx context.Context, id string) (api.TaskView, error)
	// BudgetTask raises the budget of a task parked at it, as POST
	// /v1/tasks/{id}/budget.
	BudgetTask(ctx context.Context, id string, req api.BudgetRequest) (api.TaskView, error)
	ReplyTask(ctx context.Context, id string, req api.ReplyRequest) (api.TaskView, error)
	// ApprovalLink reads a notification's approval link, and
	// UseApprovalLink answers with it, once; an expired, used, altered or
	// foreign link is refused (an *Error saying which).
	ApprovalLink(ctx context.Context, token string) (Approval, error)
	UseApprovalLink(ctx context.Context, token string) (api.TaskView, error)
	// Stopping is closed when the server shuts down: live streams end.
	Stopping() <-chan struct{}
}

// Identity is whose a token is.
type Identity struct {
	// Principal is who holds the token; empty when nobody does.
	Principal api.Principal
	// Operator is an operator's id, OperatorID of its token.
	Operator string
	// Wait, for a token nobody holds, is how long its address must wait
	// before it may try again; zero when it is not throttled.
	Wait time.Duration
}

// Error is a Backend's refusal, with the status the API answers it with
// and its one-line message.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// OperatorID names an operator without its token: the first 8 bytes of
// the token's SHA-256, in hex.
func OperatorID(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:8])
}

// SessionKey is the key that signs an operator's sessions, derived from
// its token: removing the token ends them.
func SessionKey(tok string) []byte {
	m := hmac.New(sha256.New, []byte(tok))
	m.Write([]byte("agent console session v1"))
	return m.Sum(nil)
}
