package server

import (
	"fmt"
	"maps"
	"net/http"

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

// DefaultDelegation is the rule a control plane with no [[delegate]]
// table applies: any task may delegate to any, two levels deep, eight
// children each.
var DefaultDelegation = DelegateRule{MaxDepth: 2, MaxChildren: 8}

// rules are the delegation rules in force: the configured ones, or the
// default.
func (s *Server) rules() []DelegateRule {
	if len(s.opts.Delegate) == 0 {
		return []DelegateRule{DefaultDelegation}
	}
	return s.opts.Delegate
}

// delegation decides whether parent may submit child, under the first
// rule that matches both; a refusal is 403, said in one line.
func (s *Server) delegation(parent, child *state.Task) error {
	refused := func(why string, args ...any) error {
		return &httpError{http.StatusForbidden, "delegation refused: " + fmt.Sprintf(why, args...)}
	}
	for _, r := range s.rules() {
		if !hasLabels(parent.Labels, r.Parent) || !hasLabels(child.Labels, r.Child) {
			continue
		}
		depth, most := r.MaxDepth, r.MaxChildren
		if depth <= 0 {
			depth = DefaultDelegation.MaxDepth
		}
		if most <= 0 {
			most = DefaultDelegation.MaxChildren
		}
		switch {
		case parent.Depth+1 > depth:
			return refused("depth %d is past max-depth %d", parent.Depth+1, depth)
		case len(parent.Children) >= most:
			return refused("task %s has %d subtasks already, max-children is %d", parent.ID, len(parent.Children), most)
		}
		return nil
	}
	return refused("no [[delegate]] rule lets a task labelled %s delegate to one labelled %s", api.LabelsText(parent.Labels), api.LabelsText(child.Labels))
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
