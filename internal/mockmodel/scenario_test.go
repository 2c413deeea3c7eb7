package mockmodel

import "testing"

func TestScenarioLine(t *testing.T) {
	for _, c := range []struct {
		name, line, model, want, after string
	}{
		{"empty is text", "", "m", "text", "final"},
		{"one for every model", "r429", "m", "r429", "final"},
		{"per model", "gpt-a=r429 gpt-b=text", "gpt-a", "r429", "final"},
		{"per model, the other", "gpt-a=r429 gpt-b=text", "gpt-b", "text", "final"},
		{"a model not named gets the bare one", "hang gpt-a=r429", "gpt-z", "hang", "final"},
		{"after a tool", "shell after=r500", "m", "shell", "r500"},
		{"after is not a model", "after=r500", "after", "text", "r500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Parse(c.line, c.model); got != c.want {
				t.Errorf("Parse(%q, %q) = %q, want %q", c.line, c.model, got, c.want)
			}
			if got := afterTool(c.line); got != c.after {
				t.Errorf("afterTool(%q) = %q, want %q", c.line, got, c.after)
			}
		})
	}
}
