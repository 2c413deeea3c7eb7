package api

import (
	"testing"

	"github.com/edgeagent/agent/state"
)

// Each requirement key against what an agent advertises; a capability
// it does not advertise (an agent from before routing) meets nothing.
func TestOfferMeets(t *testing.T) {
	full := Offer{Capabilities: Capabilities{Executor: "codex", Models: []string{"gpt-5", "gpt-5-mini"}, OS: "linux", Arch: "arm64"},
		Repos: []string{"site"}, Labels: map[string]string{"gpu": "a100", "team": ""}}
	for _, c := range []struct {
		r         state.Requirement
		full, old bool
	}{
		{"executor=codex", true, false},
		{"executor=claude", false, false},
		{"model=gpt-5-mini", true, false},
		{"model=gpt-4", false, false},
		{"repo=site", true, false},
		{"repo=docs", false, false},
		{"os=linux", true, false},
		{"os=darwin", false, false},
		{"arch=arm64", true, false},
		{"arch=amd64", false, false},
		{"label=gpu", true, false},
		{"label=gpu=a100", true, false},
		{"label=gpu=h100", false, false},
		{"label=team", true, false},
		{"label=zone", false, false},
	} {
		if got := full.Meets(c.r); got != c.full {
			t.Errorf("%s: met %v by %+v, want %v", c.r, got, full, c.full)
		}
		if got := (Offer{}).Meets(c.r); got != c.old {
			t.Errorf("%s: met %v by an agent that advertises nothing, want %v", c.r, got, c.old)
		}
	}
}

// Unroutable names the first requirement no agent meets, or all of them
// when each is met but by no one agent; nothing when one meets all.
func TestUnroutableSaysWhy(t *testing.T) {
	codex := Offer{Capabilities: Capabilities{Executor: "codex"}}
	gpu := Offer{Labels: map[string]string{"gpu": "yes"}}
	rs := []state.Requirement{"executor=codex", "label=gpu"}
	for _, c := range []struct {
		name   string
		offers []Offer
		want   string
	}{
		{"no agent", nil, "no agent with executor=codex"},
		{"a gpu agent", []Offer{gpu}, "no agent with executor=codex"},
		{"a codex agent", []Offer{codex}, "no agent with label=gpu"},
		{"each alone", []Offer{codex, gpu}, "no agent with all of executor=codex, label=gpu"},
		{"one with both", []Offer{gpu, {Capabilities: codex.Capabilities, Labels: gpu.Labels}}, ""},
	} {
		if got := Unroutable(rs, c.offers); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := Unroutable(nil, nil); got != "" {
		t.Errorf("no requirement, no agent: %q, want routable", got)
	}
}
