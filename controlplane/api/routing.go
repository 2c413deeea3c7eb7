package api

import (
	"fmt"
	"slices"

	"github.com/edgeagent/agent/state"
)

// Capabilities are what an agent advertises, in its heartbeats and its
// claims, beside its repositories and labels: a task's requirements
// (state.Requirement) are matched against them. A field an agent does not
// send (an agent from before routing) is unknown, and a requirement on an
// unknown capability is not met.
type Capabilities struct {
	// Executor is the agent's executor kind: exec, codex, claude or
	// sample.
	Executor string `json:"executor,omitempty"`
	// Models are the models the agent may run (its --models list); none
	// when it leaves the choice to the executor.
	Models []string `json:"models,omitempty"`
	// OS and Arch are the agent's, as Go names them (linux, amd64).
	OS   string `json:"os,omitempty"`
	Arch string `json:"arch,omitempty"`
}

// ExecutorCLI names, for people, what an executor kind runs: "Codex"
// (codex app-server), "Claude Code", "a command" (exec), "the sample
// executor"; "" for a kind it does not know (the caller shows the kind,
// the agent's word).
func ExecutorCLI(kind string) string {
	switch kind {
	case "codex":
		return "Codex"
	case "claude":
		return "Claude Code"
	case "exec":
		return "a command"
	case "sample":
		return "the sample executor"
	}
	return ""
}

// Caps on what an agent advertises.
const (
	MaxModelsPerAgent  = 64
	MaxCapabilityBytes = 128
)

// Check refuses capabilities with more than MaxModelsPerAgent models, or
// a word over MaxCapabilityBytes or that state.CheckWord refuses (an empty
// executor, OS or arch is unknown, not refused).
func (c Capabilities) Check() error {
	if len(c.Models) > MaxModelsPerAgent {
		return fmt.Errorf("%d models; at most %d", len(c.Models), MaxModelsPerAgent)
	}
	check := func(what, w string) error {
		if len(w) > MaxCapabilityBytes {
			return fmt.Errorf("%s is over %d bytes", what, MaxCapabilityBytes)
		}
		if err := state.CheckWord(w); err != nil {
			return fmt.Errorf("%s %v", what, err)
		}
		return nil
	}
	for what, w := range map[string]string{"executor": c.Executor, "os": c.OS, "arch": c.Arch} {
		if w == "" {
			continue // unknown
		}
		if err := check(what, w); err != nil {
			return err
		}
	}
	for _, m := range c.Models {
		if err := check("model", m); err != nil {
			return err
		}
	}
	return nil
}

// Offer is everything about an agent that a requirement may name: what
// it advertises (Capabilities, Repos), and the labels a person granted
// it.
type Offer struct {
	Capabilities
	Repos  []string
	Labels map[string]string // granted, never self-described
}

// OfferOf is what agent view v offers: what it advertised, and the
// labels a person granted it (never the labels it describes itself
// with).
func OfferOf(v AgentView) Offer {
	return Offer{Capabilities: v.Capabilities, Repos: v.Repos, Labels: v.GrantedLabels}
}

// OfferOfClaim is what claim req offers, with granted, the labels a
// person granted the claiming agent: the labels the claim describes
// itself with route nothing.
func OfferOfClaim(req ClaimRequest, granted map[string]string) Offer {
	return Offer{Capabilities: req.Capabilities, Repos: req.Repos, Labels: granted}
}

// Meets reports whether o has requirement r. A capability o does not
// advertise meets nothing.
func (o Offer) Meets(r state.Requirement) bool {
	v := r.Value()
	switch r.Key() {
	case state.RequireExecutor:
		return o.Executor != "" && o.Executor == v
	case state.RequireModel:
		return slices.Contains(o.Models, v)
	case state.RequireRepo:
		return slices.Contains(o.Repos, v)
	case state.RequireOS:
		return o.OS != "" && o.OS == v
	case state.RequireArch:
		return o.Arch != "" && o.Arch == v
	case state.RequireLabel:
		key, want, anyValue := r.Label()
		got, ok := o.Labels[key]
		return ok && (anyValue || got == want)
	}
	return false
}

// MeetsAll reports whether o has every requirement of rs.
func (o Offer) MeetsAll(rs []state.Requirement) bool {
	for _, r := range rs {
		if !o.Meets(r) {
			return false
		}
	}
	return true
}

// Unroutable says why no offer of offers meets every requirement of rs,
// "" when one does (or rs is empty): "no agent with executor=codex",
// naming the first requirement no offer meets, or, when each is met by
// some offer but none meets all, "no agent with all of executor=codex,
// label=gpu".
func Unroutable(rs []state.Requirement, offers []Offer) string {
	if len(rs) == 0 {
		return ""
	}
	for _, o := range offers {
		if o.MeetsAll(rs) {
			return ""
		}
	}
	for _, r := range rs {
		met := false
		for _, o := range offers {
			met = met || o.Meets(r)
		}
		if !met {
			return "no agent with " + string(r)
		}
	}
	return "no agent with all of " + state.RequirementsText(rs)
}
