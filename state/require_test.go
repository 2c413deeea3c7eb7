package state

import (
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
