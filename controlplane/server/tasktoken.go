package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// A task token is the credential a grant carries for the task's executor
// (api.Claimed.TaskToken):
//
//	tt_TASKID.LEASEID.MAC
//
// where MAC is the hex HMAC-SHA256 of TASKID, a NUL and LEASEID, keyed with
// the store's secret "task-token" (store.Store.Secret): made once, shared
// by every replica through the store, and held by no agent host, so no
// one but the control plane can make a token. The control plane keeps no
// token: it checks one by its MAC, and then by the task, which must not
// have ended and must still hold that lease. A task that ends, or whose
// lease another grant replaced, kills its token.

// taskTokenKey is the task tokens' key: the store's secret "task-token".
func taskTokenKey(st store.Store) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, err := st.Secret(ctx, "task-token", 32)
	if err != nil {
		return nil, fmt.Errorf("controlplane: the task tokens' key: %w", err)
	}
	return key, nil
}

// taskMAC is the MAC of a task token for task id under lease.
func (rl *rules) taskMAC(id, lease string) []byte {
	m := hmac.New(sha256.New, rl.taskKey)
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write([]byte(lease))
	return m.Sum(nil)
}

// taskToken is the task token of task id under lease.
func (rl *rules) taskToken(id, lease string) string {
	return api.TaskTokenPrefix + id + "." + lease + "." + hex.EncodeToString(rl.taskMAC(id, lease))
}

// identifyTask says whose task token tok is. A token with a good MAC
// whose task ended or lost the lease is refused (401) with the reason: it
// was the caller's, and said why it no longer works helps the executor's
// author more than "wrong token".
func (s *Server) identifyTask(ctx context.Context, tok string) (caller, bool, error) {
	parts := strings.Split(strings.TrimPrefix(tok, api.TaskTokenPrefix), ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return caller{}, false, nil
	}
	id, lease := parts[0], parts[1]
	mac, err := hex.DecodeString(parts[2])
	if err != nil || !hmac.Equal(mac, s.rules.taskMAC(id, lease)) {
		return caller{}, false, nil
	}
	t, err := s.store.Task(ctx, id)
	if err != nil {
		return caller{}, false, err
	}
	dead := func(why string, args ...any) error {
		return &ruleError{errUnauthorized, "unauthorized: this task token is no longer good: " + fmt.Sprintf(why, args...)}
	}
	switch {
	case t == nil:
		return caller{}, false, dead("task %s is gone", id)
	case t.Phase.Terminal():
		return caller{}, false, dead("task %s has ended (%s)", id, t.Phase)
	case t.Lease == nil || t.Lease.ID != lease:
		return caller{}, false, dead("task %s no longer holds the lease it was granted with", id)
	}
	return caller{principal: principalTask, taskID: id}, true, nil
}

// ownTask refuses a task token's request about task id unless id is its
// own task; other principals pass.
func ownTask(ctx context.Context, id string) error {
	if c := callerOf(ctx); c.principal == principalTask && c.taskID != id {
		return &ruleError{errForbidden, fmt.Sprintf("forbidden: this task token is task %s's; it acts on that task's subtasks only, not on task %q's", c.taskID, id)}
	}
	return nil
}
