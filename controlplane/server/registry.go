package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/durable"
)

// Enrolment: an agent registers once with the registration secret and
// gets a token of its own, which alone may heartbeat, claim, release and
// post events, and only for that agent (see auth.go for who may do what).
// The registration secret enrols only an agent id nobody holds: an id
// already registered is renewed only with its current token as the bearer,
// or freed by an operator (POST /v1/agents/{id}/revoke) and then
// registered again. A lease is honoured only for the agent that holds it.
// The control plane keeps the tokens' SHA-256, never the tokens, in
// agents.json.

// registry holds the agents' token hashes, on disk and in memory.
type registry struct {
	path   string
	mu     sync.Mutex
	byHash map[string]string // token hash → agent id
	byID   map[string]string // agent id → token hash
}

func openRegistry(dir string) (*registry, error) {
	r := &registry{path: filepath.Join(dir, "agents.json"), byHash: map[string]string{}, byID: map[string]string{}}
	b, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r.byID); err != nil {
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	for id, h := range r.byID {
		r.byHash[h] = id
	}
	return r, nil
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// errRegistered: the agent id is held by a token, and the registration
// secret cannot take it over.
var errRegistered = errors.New("agent id is registered")

// register gives agent id a new token (192 bits). Unless replace is set
// (the agent itself asks, with its current token), an id that already has
// one is errRegistered.
func (r *registry) register(id string, replace bool) (string, error) {
	b := make([]byte, 24)
	rand.Read(b)
	tok := "agt_" + hex.EncodeToString(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.byID[id]
	if ok && !replace {
		return "", errRegistered
	}
	if ok {
		delete(r.byHash, old)
	}
	h := hashToken(tok)
	r.byID[id], r.byHash[h] = h, id
	if err := r.save(); err != nil {
		return "", err
	}
	return tok, nil
}

// revoke forgets agent id's token; it reports whether there was one.
func (r *registry) revoke(id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.byID[id]
	if !ok {
		return false, nil
	}
	delete(r.byID, id)
	delete(r.byHash, h)
	return true, r.save()
}

// save writes the registry, 0600, synced. mu is held.
func (r *registry) save() error {
	data, _ := json.MarshalIndent(r.byID, "", "  ")
	if err := atomic.WriteFile(r.path, strings.NewReader(string(data))); err != nil {
		return err
	}
	if err := os.Chmod(r.path, 0o600); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(r.path))
}

// agent returns the agent a token belongs to, if any.
func (r *registry) agent(tok string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.byHash[hashToken(tok)]
	return id, ok
}

// register gives an agent its own token: with the registration secret for
// an id nobody holds, with the agent's own token to replace it.
func (s *Server) register(ctx context.Context, req api.RegisterRequest) (api.RegisterResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.RegisterResponse{}, err
	}
	c := callerOf(ctx)
	if c.principal == principalAgent && c.agentID != req.AgentID {
		return api.RegisterResponse{}, &httpError{http.StatusForbidden, fmt.Sprintf("forbidden: this token is agent %s's; it renews only its own registration", c.agentID)}
	}
	tok, err := s.registry.register(req.AgentID, c.principal == principalAgent)
	if errors.Is(err, errRegistered) {
		s.log.Warn("registration refused: the agent id is held", "agent", req.AgentID)
		return api.RegisterResponse{}, &httpError{http.StatusConflict, fmt.Sprintf(
			"agent %s is registered already, with another token: the registration secret does not take over an id; renew with the agent's own token, or have an operator free the id (agent agents revoke %s)", req.AgentID, req.AgentID)}
	}
	if err != nil {
		return api.RegisterResponse{}, fmt.Errorf("register %s: %w", req.AgentID, err)
	}
	s.log.Info("agent registered", "agent", req.AgentID, "renewed", c.principal == principalAgent)
	return api.RegisterResponse{AgentID: req.AgentID, Token: tok}, nil
}

// revoke forgets an agent's token, at an operator's request: the agent's
// requests are refused (401) from now on, and its id can be registered
// again with the registration secret.
func (s *Server) revoke(id string) (api.RevokeResponse, error) {
	if err := checkAgentID(id); err != nil {
		return api.RevokeResponse{}, err
	}
	ok, err := s.registry.revoke(id)
	if err != nil {
		return api.RevokeResponse{}, fmt.Errorf("revoke %s: %w", id, err)
	}
	if !ok {
		return api.RevokeResponse{}, &httpError{http.StatusNotFound, fmt.Sprintf("agent %s is not registered", id)}
	}
	s.log.Info("agent's token revoked by an operator", "agent", id)
	return api.RevokeResponse{AgentID: id, Revoked: true}, nil
}
