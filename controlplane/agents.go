package controlplane

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

	"github.com/edgeagent/agent/internal/durable"
)

// Credentials: the shared token registers agents and serves people's
// tools (submit, reply, cancel, views); each agent registers once and gets
// a token of its own, which alone may heartbeat, claim, release and post
// events, and only for that agent. A lease is honoured only for the agent
// that holds it. The control plane keeps the tokens' SHA-256, never the
// tokens, in agents.json.

// RegisterRequest is POST /v1/agents/register (with the shared token).
type RegisterRequest struct {
	AgentID string `json:"agent_id"`
}

// RegisterResponse carries the agent's own token. Registering again
// replaces it.
type RegisterResponse struct {
	AgentID string `json:"agent_id"`
	Token   string `json:"token"`
}

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

// register gives agent id a new token, replacing any it had.
func (r *registry) register(id string) (string, error) {
	b := make([]byte, 24)
	rand.Read(b)
	tok := "agt_" + hex.EncodeToString(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byID[id]; ok {
		delete(r.byHash, old)
	}
	h := hashToken(tok)
	r.byID[id], r.byHash[h] = h, id
	data, _ := json.MarshalIndent(r.byID, "", "  ")
	if err := atomic.WriteFile(r.path, strings.NewReader(string(data))); err != nil {
		return "", err
	}
	if err := os.Chmod(r.path, 0o600); err != nil {
		return "", err
	}
	return tok, durable.SyncDir(filepath.Dir(r.path))
}

// agent returns the agent a token belongs to, if any.
func (r *registry) agent(tok string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.byHash[hashToken(tok)]
	return id, ok
}

// caller is who made a request: a person's tool (the shared token), or an
// agent (its own token).
type caller struct {
	shared  bool
	agentID string
}

type callerKey struct{}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// asAgent refuses a request for agent agentID that the agent did not make
// with its own token.
func asAgent(ctx context.Context, agentID string) error {
	c := callerOf(ctx)
	switch {
	case c.agentID == "":
		return &httpError{http.StatusForbidden, "this endpoint needs the agent's own token: register first (POST /v1/agents/register)"}
	case c.agentID != agentID:
		return &httpError{http.StatusForbidden, fmt.Sprintf("this token is agent %s's, not %s's", c.agentID, agentID)}
	}
	return nil
}
