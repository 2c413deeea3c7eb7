package state

import (
	"slices"
	"strings"
	"testing"
)

func TestRequirementCheck(t *testing.T) {
	for _, c := range []struct {
		r    Requirement
		says string // "" for a good one
	}{
		{"executor=codex", ""},
		{"model=claude-sonnet-4@2025", ""},
		{"model=openrouter/qwen:free", ""},
		{"label=gpu", ""},
		{"label=gpu=a100", ""},
		{"repo=app", ""},
		{"gpu", "KEY one of executor, model, repo, os, arch, label"},
		{"=x", "KEY one of"},
		{"OS=linux", "KEY one of"},
		{"os=", "the value is empty"},
		{"os=li nux", "holds a space"},
		{"model=a,b", "','"},
		{"label=a=b=c", "want label=NAME"},
		{"label=.x", "want label=NAME"},
		{"label=x=", "want label=NAME"},
		{"os=linux\x1b[2J", "control character"},
	} {
		err := c.r.Check()
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%q: %v, want it accepted", c.r, err)
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%q: %v, want an error saying %q", c.r, err, c.says)
		}
	}
	if key, value, any := Requirement("label=gpu=a100").Label(); key != "gpu" || value != "a100" || any {
		t.Errorf("label=gpu=a100: %q %q %v", key, value, any)
	}
	if key, _, any := Requirement("label=gpu").Label(); key != "gpu" || !any {
		t.Errorf("label=gpu: %q %v", key, any)
	}
}

// A subtask's requirements narrow its parent's: they add and restrict,
// never replace or drop.
func TestNarrow(t *testing.T) {
	rs := func(s ...string) []Requirement {
		out := make([]Requirement, len(s))
		for i, x := range s {
			out[i] = Requirement(x)
		}
		return out
	}
	for _, c := range []struct {
		parent, child []Requirement
		want          []Requirement
		refused       string
	}{
		{parent: nil, child: rs("label=tier=trusted"), want: rs("label=tier=trusted")},
		{parent: rs("label=tier=sandbox"), child: nil, want: rs("label=tier=sandbox")},
		{parent: rs("label=tier=sandbox"), child: rs("label=tier=sandbox"), want: rs("label=tier=sandbox")},
		{parent: rs("label=tier=sandbox"), child: rs("executor=codex", "label=gpu"), want: rs("label=tier=sandbox", "executor=codex", "label=gpu")},
		{parent: rs("executor=codex", "label=gpu"), child: rs("label=gpu=a100"), want: rs("executor=codex", "label=gpu=a100")},
		{parent: rs("label=gpu=a100"), child: rs("label=gpu"), want: rs("label=gpu=a100")},
		{parent: rs("label=tier=sandbox"), child: rs("label=tier=trusted"), refused: "label=tier=trusted would replace the parent's label=tier=sandbox"},
		{parent: rs("executor=codex"), child: rs("executor=claude"), refused: "executor=claude would replace the parent's executor=codex"},
		{parent: rs("os=linux"), child: rs("os=darwin"), refused: "os=darwin would replace"},
		{parent: rs("model=gpt-5"), child: rs("model=gpt-5-mini"), refused: "model=gpt-5-mini would replace"},
		{parent: rs("label=gpu=a100"), child: rs("label=gpu=h100"), refused: "label=gpu=h100 would replace"},
	} {
		got, err := Narrow(c.parent, c.child)
		switch {
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("Narrow(%v, %v) = %v, %v; want refused: %s", c.parent, c.child, got, err, c.refused)
		case c.refused == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("Narrow(%v, %v) = %v, %v; want %v", c.parent, c.child, got, err, c.want)
		}
	}
	parent := rs("label=gpu")
	if _, err := Narrow(parent, rs("label=gpu=a100")); err != nil || parent[0] != "label=gpu" {
		t.Errorf("Narrow changed its parent's requirements: %v", parent)
	}
}
