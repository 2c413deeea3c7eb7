package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// Labels route trust, so a person grants them: an operator binds labels
// to an enrolled agent (POST /v1/agents/{id}/labels, agent agents
// label), and only those meet a task's label requirement. What an agent
// says of itself (its --label, in heartbeats and claims) is kept and
// shown as self-described, and routes nothing: every agent host holds
// the registration secret, so any of them could say anything. An agent
// registered before the store kept granted labels adopts the labels it
// advertises once, at its next heartbeat or claim (adoptLabels): an
// installation where nobody set labels by hand routes as before.

// labelAgent grants and takes back agent id's labels, at an operator's
// request.
func (rl *rules) labelAgent(ctx context.Context, id string, req api.LabelsRequest) (api.LabelsResponse, error) {
	if err := checkAgentID(id); err != nil {
		return api.LabelsResponse{}, err
	}
	if len(req.Set) == 0 && len(req.Remove) == 0 {
		return api.LabelsResponse{}, invalidRequest("no label to set or remove: want set {KEY: VALUE} or remove [KEY]")
	}
	if err := api.CheckLabels(req.Set); err != nil {
		return api.LabelsResponse{}, invalidRequest("set: %v", err)
	}
	if len(req.Remove) > api.MaxLabels {
		return api.LabelsResponse{}, invalidRequest("remove: %d keys; at most %d", len(req.Remove), api.MaxLabels)
	}
	for _, k := range req.Remove {
		if err := api.CheckLabels(map[string]string{k: ""}); err != nil {
			return api.LabelsResponse{}, invalidRequest("remove: %v", err)
		}
		if _, ok := req.Set[k]; ok {
			return api.LabelsResponse{}, invalidRequest("label %s is both set and removed", k)
		}
	}
	a, _, err := rl.store.Agent(ctx, id)
	if err != nil {
		return api.LabelsResponse{}, storeErr("label "+id, err)
	}
	after := maps.Clone(a.Granted)
	if after == nil {
		after = map[string]string{}
	}
	maps.Copy(after, req.Set)
	for _, k := range req.Remove {
		delete(after, k)
	}
	if len(after) > api.MaxLabels {
		return api.LabelsResponse{}, invalidRequest("agent %s would hold %d labels; at most %d", id, len(after), api.MaxLabels)
	}
	labels, err := rl.store.GrantLabels(ctx, id, req.Set, req.Remove)
	if errors.Is(err, store.ErrNotRegistered) {
		return api.LabelsResponse{}, &ruleError{errNotFound, fmt.Sprintf("agent %s is not registered: labels are granted to an enrolled agent", id)}
	}
	if err != nil {
		return api.LabelsResponse{}, storeErr("label "+id, err)
	}
	rl.log.Info("agent's labels granted by an operator", "agent", id, "labels", api.LabelsText(labels), "removed", slices.Sorted(slices.Values(req.Remove)))
	// A task waiting for these labels may go to it now.
	rl.dispatch.wakeAll()
	return api.LabelsResponse{AgentID: id, Labels: labels}, nil
}

// adoptLabels grants agent a the labels it advertises when it is one to
// adopt them (registered before granted labels were kept), once. It
// keeps a's Granted as the store has them after.
func (rl *rules) adoptLabels(ctx context.Context, a *store.Agent, id string, labels map[string]string) error {
	if !a.AdoptLabels {
		return nil
	}
	ok, err := rl.store.AdoptLabels(ctx, id, labels)
	if err != nil {
		return err
	}
	if !ok {
		// Adopted, granted or revoked meanwhile: what the store holds now.
		now, _, err := rl.store.Agent(ctx, id)
		a.Granted, a.AdoptLabels = now.Granted, now.AdoptLabels
		return err
	}
	a.Granted, a.AdoptLabels = maps.Clone(labels), false
	rl.log.Info("agent from before granted labels adopts the labels it advertises, once", "agent", id, "labels", api.LabelsText(labels))
	return nil
}
