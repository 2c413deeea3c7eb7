package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// Enrolment: an agent registers once with the registration secret and
// gets a token of its own, which alone may heartbeat, claim, release and
// post events, and only for that agent (see auth.go for who may do what).
// The registration secret enrols only an agent id nobody holds: an id
// already registered is renewed only with its current token as the bearer,
// or freed by an operator (POST /v1/agents/{id}/revoke) and then
// registered again. A lease is honoured only for the agent that holds it.
// The control plane's store keeps the tokens' SHA-256, never the tokens.

// hashToken is what the store keeps of a token: its SHA-256, in hex.
func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// newAgentToken is a new agent token: 192 random bits.
func newAgentToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "agt_" + hex.EncodeToString(b)
}

// register gives an agent its own token: with the registration secret for
// an id nobody holds, with the agent's own token to replace it.
func (rl *rules) register(ctx context.Context, req api.RegisterRequest) (api.RegisterResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.RegisterResponse{}, err
	}
	c := callerOf(ctx)
	if c.principal == principalAgent && c.agentID != req.AgentID {
		return api.RegisterResponse{}, &ruleError{errForbidden, fmt.Sprintf("forbidden: this token is agent %s's; it renews only its own registration", c.agentID)}
	}
	tok := newAgentToken()
	err := rl.store.Register(ctx, req.AgentID, hashToken(tok), c.principal == principalAgent)
	if errors.Is(err, store.ErrRegistered) {
		rl.log.Warn("registration refused: the agent id is held", "agent", req.AgentID)
		return api.RegisterResponse{}, &ruleError{errConflict, fmt.Sprintf(
			"agent %s is registered already, with another token: the registration secret does not take over an id; renew with the agent's own token, or have an operator free the id (agent agents revoke %s)", req.AgentID, req.AgentID)}
	}
	if err != nil {
		return api.RegisterResponse{}, storeErr("register "+req.AgentID, err)
	}
	rl.log.Info("agent registered", "agent", req.AgentID, "renewed", c.principal == principalAgent)
	return api.RegisterResponse{AgentID: req.AgentID, Token: tok}, nil
}

// revoke forgets an agent's token, at an operator's request: the agent's
// requests are refused (401) from now on, and its id can be registered
// again with the registration secret.
func (rl *rules) revoke(ctx context.Context, id string) (api.RevokeResponse, error) {
	if err := checkAgentID(id); err != nil {
		return api.RevokeResponse{}, err
	}
	ok, err := rl.store.Revoke(ctx, id)
	if err != nil {
		return api.RevokeResponse{}, storeErr("revoke "+id, err)
	}
	if !ok {
		return api.RevokeResponse{}, &ruleError{errNotFound, fmt.Sprintf("agent %s is not registered", id)}
	}
	rl.log.Info("agent's token revoked by an operator", "agent", id)
	return api.RevokeResponse{AgentID: id, Revoked: true}, nil
}
