package mockmodel

import "testing"

// The scenario syntax: what a prompt's lines make the mock answer, per
// model and per turn.
func TestScenarioFromThePrompt(t *testing.T) {
	for _, c := range []struct {
		name       string
		texts      []string
		msgs       []Message // instead of texts, when the model answered between
		model      string
		toolResult bool
		want       Scenario
		wantErr    bool
	}{
		{name: "no line is text", texts: []string{"Say hello"}, model: "m", want: ScenarioText},
		{name: "no text at all is text", model: "m", want: ScenarioText},
		{name: "one for every model", texts: []string{"x\nmock: r429"}, model: "m", want: ScenarioRateLimit},
		{name: "spaces around the line", texts: []string{"x\n   mock:   hang_headers  \ny"}, model: "m", want: ScenarioHangHeaders},
		{name: "per model", texts: []string{"mock: gpt-a=r429 gpt-b=text"}, model: "gpt-a", want: ScenarioRateLimit},
		{name: "per model, the other", texts: []string{"mock: gpt-a=r429 gpt-b=text"}, model: "gpt-b", want: ScenarioText},
		{name: "a model not named gets text", texts: []string{"mock: gpt-a=r429"}, model: "gpt-z", want: ScenarioText},
		{name: "a model not named gets the bare name", texts: []string{"mock: hang gpt-a=r429"}, model: "gpt-z", want: ScenarioHang},
		{name: "a named model wins over the bare name, wherever it stands", texts: []string{"mock: gpt-a=r429 hang"}, model: "gpt-a", want: ScenarioRateLimit},
		{name: "the last user text with a line wins", texts: []string{"mock: r500", "mock: cut", "no line here"}, model: "m", want: ScenarioCut},
		{name: "the last line of a text wins", texts: []string{"mock: r500\nmock: quota"}, model: "m", want: ScenarioQuota},
		{name: "not at the start of a line is not a line", texts: []string{"say mock: r500"}, model: "m", want: ScenarioText},
		{name: "a tool result gets the final text", texts: []string{"mock: shell"}, model: "m", toolResult: true, want: ScenarioFinal},
		{name: "a tool result gets after", texts: []string{"mock: shell after=r500"}, model: "m", toolResult: true, want: ScenarioServerError},
		{name: "after does not apply before the tool", texts: []string{"mock: shell after=r500"}, model: "m", want: ScenarioShell},
		{name: "after is not a model", texts: []string{"mock: after=r500"}, model: "after", want: ScenarioText},
		{name: "an unknown name is an error", texts: []string{"mock: r249"}, model: "m", want: "r249", wantErr: true},
		{name: "an unknown name for another model is no error", texts: []string{"mock: gpt-a=nope"}, model: "gpt-b", want: ScenarioText},
		{name: "a follow-up after the model answered is a new turn", msgs: []Message{{RoleUser, "x\nmock: hang"}, {RoleAssistant, HelloText}, {RoleUser, "Go on"}},
			model: "m", want: ScenarioText},
		{name: "a follow-up says its own", msgs: []Message{{RoleUser, "x\nmock: hang"}, {RoleAssistant, HelloText}, {RoleUser, "Go on\nmock: r500"}},
			model: "m", want: ScenarioServerError},
		{name: "a follow-up after a tool's result is a new turn", msgs: []Message{{RoleUser, "x\nmock: shell after=r500"}, {RoleTool, ""}, {RoleUser, "Go on"}},
			model: "m", want: ScenarioText},
		{name: "a tool's result in the turn keeps the turn's after", msgs: []Message{{RoleUser, "x\nmock: shell after=r500"}, {RoleTool, ""}},
			model: "m", toolResult: true, want: ScenarioServerError},
		{name: "a follow-up after a cut turn keeps the turn's line", msgs: []Message{{RoleUser, "x\nmock: hang"}, {RoleUser, "Go on"}},
			model: "m", want: ScenarioHang},
		{name: "an unknown name after the tool is an error", texts: []string{"mock: shell after=nope"}, model: "m", toolResult: true, want: "nope", wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			msgs := c.msgs
			if msgs == nil {
				msgs = userTexts(c.texts...)
			}
			got, err := parseDirectives(msgs).scenario(c.model, c.toolResult)
			if got != c.want || (err != nil) != c.wantErr {
				t.Errorf("scenario(%q) for %s (tool result %v) = %q, %v; want %q, error %v", c.texts, c.model, c.toolResult, got, err, c.want, c.wantErr)
			}
		})
	}
}

func TestCommandAndFileLines(t *testing.T) {
	for _, c := range []struct {
		name          string
		texts         []string
		command, file string
	}{
		{name: "defaults", texts: []string{"mock: shell"}, command: DefaultCommand},
		{name: "given", texts: []string{"mock: shell\nmock-cmd: echo hi > hi.txt\nmock-file: out/a.txt"}, command: "echo hi > hi.txt", file: "out/a.txt"},
		{name: "the last wins", texts: []string{"mock-cmd: one", "mock-cmd: two"}, command: "two"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := parseDirectives(userTexts(c.texts...))
			if d.commandOr() != c.command || d.file != c.file {
				t.Errorf("command %q, file %q; want %q, %q", d.commandOr(), d.file, c.command, c.file)
			}
		})
	}
}

// userTexts is a conversation of the user's texts alone.
func userTexts(texts ...string) []Message {
	var msgs []Message
	for _, t := range texts {
		msgs = append(msgs, Message{Role: RoleUser, Text: t})
	}
	return msgs
}
