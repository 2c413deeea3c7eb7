package server

import (
	"fmt"
	"maps"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// DelegateRule is one delegation rule of the control plane's config (a
// [[delegate]] table): a task whose labels hold every one of Parent's may
// submit subtasks whose labels hold every one of Child's, nesting at most
// MaxDepth deep (a task a person submitted is depth 0, its subtasks depth
// 1), at most MaxChildren of them per task. The first rule that matches a
// delegation decides it; a delegation no rule matches is refused.
type DelegateRule struct {
	// Parent and Child are the labels the parent and the child must
	// carry; empty matches any task.
	Parent map[string]string
	Child  map[string]string
	// MaxDepth is the deepest a child may nest; MaxChildren, the most
	// subtasks one parent may submit (ended ones count). Zero takes the
	// default's.
	MaxDepth    int
	MaxChildren int
}

// DefaultDelegation is the bounds of the default rules, which a control
// plane with no [[delegate]] table applies by the parent's agent type
// (its type label, state.TypeOf): a general task (the type of a task with
// none) may delegate to any task; an explorer is a leaf, delegating to
// nothing; a task of any other type may delegate to explorers only. Each
// nests two levels deep, eight children per task. The bounds fill a
// configured rule's zero limits too.
var DefaultDelegation = DelegateRule{MaxDepth: 2, MaxChildren: 8}

// defaultRules are the default rules for a parent of agent type typ.
func defaultRules(typ string) []DelegateRule {
	switch typ {
	case state.TypeGeneral:
		return []DelegateRule{DefaultDelegation}
	case state.TypeExplorer:
		return nil // a leaf
	}
	explorers := DefaultDelegation
	explorers.Child = map[string]string{state.TypeLabel: state.TypeExplorer}
	return []DelegateRule{explorers}
}

// rulesFor are the rules that may let parent delegate, in order: the
// configured rules whose parent labels it carries, or the default rules
// for its type when none is configured (configured false).
func (rl *rules) rulesFor(parent *state.Task) (rules []DelegateRule, configured bool) {
	if len(rl.opts.Delegate) == 0 {
		return defaultRules(state.TypeOf(parent.Labels)), false
	}
	for _, r := range rl.opts.Delegate {
		if hasLabels(parent.Labels, r.Parent) {
			rules = append(rules, r)
		}
	}
	return rules, true
}

// bounds are r's limits, a zero one the default's.
func (r DelegateRule) bounds() (depth, children int) {
	depth, children = r.MaxDepth, r.MaxChildren
	if depth <= 0 {
		depth = DefaultDelegation.MaxDepth
	}
	if children <= 0 {
		children = DefaultDelegation.MaxChildren
	}
	return depth, children
}

// delegationOf is what t may delegate to under the rules in force.
func (rl *rules) delegationOf(t *state.Task) *state.Delegation {
	rules, configured := rl.rulesFor(t)
	d := &state.Delegation{To: make([]state.DelegateTarget, 0, len(rules)), Default: !configured}
	for _, r := range rules {
		depth, most := r.bounds()
		d.To = append(d.To, state.DelegateTarget{Child: maps.Clone(r.Child), MaxDepth: depth, MaxChildren: most})
	}
	return d
}

// delegation decides whether parent may submit child, under the first
// rule that lets parent delegate and matches child; a refusal is 403,
// said in one line.
func (rl *rules) delegation(parent, child *state.Task) error {
	refused := func(why string, args ...any) error {
		return &ruleError{errForbidden, "delegation refused: " + fmt.Sprintf(why, args...)}
	}
	rules, configured := rl.rulesFor(parent)
	for _, r := range rules {
		if !hasLabels(child.Labels, r.Child) {
			continue
		}
		depth, most := r.bounds()
		switch {
		case parent.Depth+1 > depth:
			return refused("depth %d is past max-depth %d", parent.Depth+1, depth)
		case len(parent.Children) >= most:
			return refused("task %s has %d subtasks already, max-children is %d", parent.ID, len(parent.Children), most)
		}
		return nil
	}
	typ := state.TypeOf(parent.Labels)
	switch {
	case configured:
		return refused("no [[delegate]] rule lets a task labelled %s delegate to one labelled %s", api.LabelsText(parent.Labels), api.LabelsText(child.Labels))
	case len(rules) == 0:
		return refused("task %s is of type %s, a leaf: it delegates to nothing (the default rules; [[delegate]] tables set others)", parent.ID, typ)
	}
	return refused("a task of type %s may delegate to type=%s only, not to one labelled %s (the default rules; [[delegate]] tables set others)", typ, state.TypeExplorer, api.LabelsText(child.Labels))
}

// hasLabels reports whether labels hold every one of want.
func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// CheckDelegateRules refuses rules a control plane cannot apply: bad
// labels, a negative limit.
func CheckDelegateRules(rules []DelegateRule) error {
	for i, r := range rules {
		for _, l := range []map[string]string{r.Parent, r.Child} {
			if err := api.CheckLabels(l); err != nil {
				return fmt.Errorf("delegate rule %d: %w", i+1, err)
			}
		}
		if r.MaxDepth < 0 || r.MaxChildren < 0 {
			return fmt.Errorf("delegate rule %d: max-depth and max-children are 1 or more", i+1)
		}
	}
	return nil
}

// cloneRules copies rules, so that the caller's maps are not shared.
func cloneRules(rules []DelegateRule) []DelegateRule {
	out := make([]DelegateRule, len(rules))
	for i, r := range rules {
		r.Parent, r.Child = maps.Clone(r.Parent), maps.Clone(r.Child)
		out[i] = r
	}
	return out
}
