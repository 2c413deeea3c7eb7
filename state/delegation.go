package state

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// TypeLabel is the label that names a task's agent type
// (--label type=explorer): what the control plane's default delegation
// rules decide by.
const TypeLabel = "type"

// The agent types the default delegation rules know. A task with no type
// label is general.
const (
	// TypeGeneral may delegate to any task.
	TypeGeneral = "general"
	// TypeExplorer is a leaf: it looks, and delegates to nothing.
	TypeExplorer = "explorer"
)

// TypeOf is the agent type of a task carrying labels: its type label, or
// general.
func TypeOf(labels map[string]string) string {
	if t := labels[TypeLabel]; t != "" {
		return t
	}
	return TypeGeneral
}

// Delegation is what a task may delegate to, as the control plane's
// delegation rules say: the subtasks each rule that matches the task
// lets it submit, in the order the rules are tried (the first whose
// child labels a subtask carries decides), with their bounds. With none,
// the task is a leaf: it submits no subtask, and its executor is offered
// no subtask command (no task token). The control plane sets it when
// the task is submitted and again when it is claimed.
type Delegation struct {
	To []DelegateTarget `json:"to"`
	// Default: no [[delegate]] table is configured, and the default
	// rules, by agent type, decided.
	Default bool `json:"default,omitempty"`
}

// DelegateTarget is one kind of subtask a task may submit: one that
// carries every one of Child's labels (any task when Child is empty),
// nesting at most MaxDepth deep, at most MaxChildren of them.
type DelegateTarget struct {
	Child       map[string]string `json:"child,omitempty"`
	MaxDepth    int               `json:"max_depth"`
	MaxChildren int               `json:"max_children"`
}

// Leaf reports whether the task may delegate to nothing.
func (d *Delegation) Leaf() bool { return d != nil && len(d.To) == 0 }

// Clone returns a copy of d that shares nothing.
func (d *Delegation) Clone() *Delegation {
	if d == nil {
		return nil
	}
	c := *d
	c.To = make([]DelegateTarget, len(d.To))
	for i, t := range d.To {
		t.Child = maps.Clone(t.Child)
		c.To[i] = t
	}
	return &c
}

// DelegationLines say what task t may delegate to now, a line each, for
// `agent tasks show` and `agent subtask allowed`:
//
//	type=explorer  depth 1 of 2, 1 of 8 subtasks submitted
//	any task       none now: depth 3 would pass max-depth 2
//
// or why it may delegate to nothing. Nil when the control plane said
// nothing (one from before delegation was listed).
func DelegationLines(t *Task) []string {
	d := t.Delegation
	switch {
	case d == nil:
		return nil
	case d.Leaf():
		why := "no [[delegate]] rule matches its labels"
		if d.Default {
			why = "its type, " + TypeOf(t.Labels) + ", is a leaf"
		}
		return []string{"nothing: " + why + "; it is offered no subtask command"}
	}
	var whom []string
	w := 0
	for _, to := range d.To {
		s := "any task"
		if len(to.Child) > 0 {
			keys := slices.Sorted(maps.Keys(to.Child))
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + "=" + to.Child[k]
			}
			s = strings.Join(parts, ",")
		}
		whom = append(whom, s)
		w = max(w, len(s))
	}
	lines := make([]string, len(d.To))
	for i, to := range d.To {
		what := fmt.Sprintf("depth %d of %d, %d of %d subtasks submitted", t.Depth+1, to.MaxDepth, len(t.Children), to.MaxChildren)
		switch {
		case t.Depth+1 > to.MaxDepth:
			what = fmt.Sprintf("none now: depth %d would pass max-depth %d", t.Depth+1, to.MaxDepth)
		case len(t.Children) >= to.MaxChildren:
			what = fmt.Sprintf("none now: %d of %d subtasks submitted", len(t.Children), to.MaxChildren)
		}
		lines[i] = fmt.Sprintf("%-*s  %s", w, whom[i], what)
	}
	return lines
}
