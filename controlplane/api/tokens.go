package api

import "fmt"

// MinTokenLen is the shortest token the control plane and its clients
// take: 32 characters, 128 bits when they are hex digits. The tokens the
// control plane makes are longer (192 bits or more).
const MinTokenLen = 32

// CheckToken refuses a token that cannot go in an Authorization header as
// it is (visible ASCII, no spaces) or that is shorter than MinTokenLen.
// The error never holds the token.
func CheckToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return fmt.Errorf("a token is one word of visible ASCII characters (no spaces)")
		}
	}
	if len(tok) < MinTokenLen {
		return fmt.Errorf("the token is %d characters; a token needs at least %d (128 bits as hex digits): make one with openssl rand -hex 32", len(tok), MinTokenLen)
	}
	return nil
}

// Principal is whom a token speaks for, as GET /v1/whoami says it.
type Principal string

// The principals: a person, an agent with its own token, and the
// registration secret, which only enrols agents.
const (
	PrincipalOperator     Principal = "operator"
	PrincipalAgent        Principal = "agent"
	PrincipalRegistration Principal = "registration"
)

// WhoAmI answers GET /v1/whoami: whose the token is and, for an agent, its
// id. Tools check with it that they hold the credential they need.
type WhoAmI struct {
	Principal Principal `json:"principal"`
	AgentID   string    `json:"agent_id,omitempty"`
	// TaskID is a task token's task.
	TaskID string `json:"task_id,omitempty"`
}

// RegisterRequest is POST /v1/agents/register: with the registration
// secret for an id nobody holds, or with the agent's own token to replace
// it.
type RegisterRequest struct {
	AgentID string `json:"agent_id"`
}

// RegisterResponse carries the agent's own token.
type RegisterResponse struct {
	AgentID string `json:"agent_id"`
	Token   string `json:"token"`
}

// RevokeResponse answers POST /v1/agents/{id}/revoke.
type RevokeResponse struct {
	AgentID string `json:"agent_id"`
	Revoked bool   `json:"revoked"`
}
