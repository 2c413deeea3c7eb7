package mockmodel

import (
	"fmt"
	"strings"
)

// Scenario names how the mock answers a request. The names are what a
// prompt's "mock:" line says, so they are API for tests.
type Scenario string

// The scenarios. See the package documentation for what each sends.
const (
	ScenarioText      Scenario = "text"
	ScenarioShell     Scenario = "shell"
	ScenarioWrite     Scenario = "write"
	ScenarioEdit      Scenario = "edit"
	ScenarioEscalate  Scenario = "escalate"
	ScenarioRateLimit Scenario = "r429"
	ScenarioQuota     Scenario = "quota"
	// ScenarioUsageLimit: the account's usage limit, reached until it
	// resets (Server.UsageLimitReset after the first such answer); past
	// the reset, the request is answered as text.
	ScenarioUsageLimit   Scenario = "usage_limit"
	ScenarioUnauthorized Scenario = "r401"
	ScenarioForbidden    Scenario = "r403"
	ScenarioServerError  Scenario = "r500"
	ScenarioOverloaded   Scenario = "overloaded"
	ScenarioContext      Scenario = "context"
	ScenarioCut          Scenario = "cut"
	ScenarioHang         Scenario = "hang"
	ScenarioHangHeaders  Scenario = "hang_headers"
	// ScenarioFinal is the answer to a request that carries a tool result:
	// FinalText, streamed like text.
	ScenarioFinal Scenario = "final"
)

var scenarios = map[Scenario]bool{
	ScenarioText: true, ScenarioShell: true, ScenarioWrite: true, ScenarioEdit: true, ScenarioEscalate: true,
	ScenarioRateLimit: true, ScenarioQuota: true, ScenarioUsageLimit: true, ScenarioUnauthorized: true, ScenarioForbidden: true,
	ScenarioServerError: true, ScenarioOverloaded: true, ScenarioContext: true, ScenarioCut: true,
	ScenarioHang: true, ScenarioHangHeaders: true, ScenarioFinal: true,
}

// The texts the mock answers with.
const (
	// HelloText is the text scenario's answer.
	HelloText = "Hello from the mock model."
	// FinalText answers a request that carries a tool result.
	FinalText = "Done: the tool ran."
	// DefaultCommand is what shell runs without a "mock-cmd:" line: it
	// leaves a file in the CLI's working directory as proof.
	DefaultCommand = "echo mock-side-effect > mock_side_effect.txt"
	// PatchFile is the file Codex's apply_patch adds, in its working
	// directory, without a "mock-file:" line.
	PatchFile = "mock_patch.txt"
	// WriteFile is the file Claude Code's Write creates, in its working
	// directory, without a "mock-file:" line.
	WriteFile = "mock_write.txt"
	// WrittenContent is what write puts in the file.
	WrittenContent = "written by the mock model\n"
	// EditedContent is what edit makes of a file that holds
	// WrittenContent: its one line replaced.
	EditedContent = "edited by the mock model\n"
)

// directives are what the user's prompt tells the mock: the last line of
// each kind wins.
type directives struct {
	line    string // the text after "mock:"
	command string // "mock-cmd:"
	file    string // "mock-file:"
}

// parseDirectives reads the conversation's user texts, oldest first, from
// the model's last text answer or tool result on: a follow-up sent after
// the model answered or a tool ran is a new turn, and what an earlier turn asked for does not
// apply to it.
func parseDirectives(msgs []Message) directives {
	var (
		d      directives
		toolAt bool // a tool's result came back since the last user text
	)
	for _, m := range msgs {
		switch {
		case m.Role == RoleTool:
			toolAt = true
			continue
		case m.Role != RoleUser:
			d = directives{}
			continue
		case toolAt:
			// A user's text after a tool's result (a continue's
			// follow-up) is a turn of its own too.
			d, toolAt = directives{}, false
		}
		for _, l := range strings.Split(m.Text, "\n") {
			l = strings.TrimSpace(l)
			if rest, ok := strings.CutPrefix(l, "mock:"); ok {
				d.line = strings.TrimSpace(rest)
			} else if rest, ok := strings.CutPrefix(l, "mock-cmd:"); ok {
				d.command = strings.TrimSpace(rest)
			} else if rest, ok := strings.CutPrefix(l, "mock-file:"); ok {
				d.file = strings.TrimSpace(rest)
			}
		}
	}
	return d
}

// scenario is the scenario for a request to model. A bare name applies to
// every model, MODEL=NAME to that model only (it wins over a bare name),
// and a request that carries a tool result gets "after=NAME", else final.
// No line means text; a name the mock does not know is an error, so that
// a typo fails the test that made it.
func (d directives) scenario(model string, toolResult bool) (Scenario, error) {
	s, forModel, after := ScenarioText, Scenario(""), ScenarioFinal
	for _, f := range strings.Fields(d.line) {
		key, name, pair := strings.Cut(f, "=")
		switch {
		case !pair:
			s = Scenario(f)
		case key == "after":
			after = Scenario(name)
		case key == model:
			forModel = Scenario(name)
		}
	}
	if forModel != "" {
		s = forModel
	}
	if toolResult {
		s = after
	}
	if !scenarios[s] {
		return s, fmt.Errorf("mock: unknown scenario %q in %q", s, d.line)
	}
	return s, nil
}

// commandOr is the shell scenario's command.
func (d directives) commandOr() string {
	if d.command != "" {
		return d.command
	}
	return DefaultCommand
}
