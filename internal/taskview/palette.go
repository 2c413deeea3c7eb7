package taskview

import (
	"io"
	"os"
	"slices"
	"time"

	"github.com/edgeagent/agent/state"
)

// Palette colours what the tasks commands print for a person: phases, the
// progress card's steps and the timeline's attempts. Its caller turns it
// on only for a terminal, and never with NO_COLOR set; --json never goes
// through it.
type Palette struct{ On bool }

// PaletteFor is the palette for output to w: on only for a terminal, and
// never with NO_COLOR set.
func PaletteFor(w io.Writer) Palette {
	return Palette{On: os.Getenv("NO_COLOR") == "" && IsTerminal(w)}
}

// The colours. Each is as long as the others, so that columns aligned by
// a tabwriter stay aligned whatever colour a cell has.
const (
	ColourPlain  = "\x1b[39m" // the terminal's own foreground
	ColourRed    = "\x1b[31m"
	ColourGreen  = "\x1b[32m"
	ColourYellow = "\x1b[33m"
	ColourCyan   = "\x1b[36m"
	ColourOff    = "\x1b[0m"
)

// Paint wraps s in colour c, if the palette is on.
func (p Palette) Paint(c, s string) string {
	if !p.On {
		return s
	}
	return c + s + ColourOff
}

// groupColours are the terminal's colours of the groups: completed green;
// failed red; what waits for a person (a question, a stop to decide on),
// a parked task and a cancelled one yellow; the running phases cyan; a
// queued task plain.
var groupColours = map[Group]string{
	Completed: ColourGreen, Failed: ColourRed,
	Waiting: ColourYellow, Parked: ColourYellow, Cancelled: ColourYellow,
	Running: ColourCyan, Queued: ColourPlain,
}

// PhaseColour is the terminal colour of phase ph: its group's, plain for
// a phase this build does not know.
func PhaseColour(ph state.Phase) string {
	if !slices.Contains(state.Phases, ph) {
		return ColourPlain
	}
	return groupColours[GroupOf(ph)]
}

// Phase is the phase's name, in its colour.
func (p Palette) Phase(ph state.Phase) string { return p.Paint(PhaseColour(ph), Visible(string(ph))) }

// stepMarks are the progress card's marks, by status.
var stepMarks = map[state.StepStatus]string{state.StepDone: "[x]", state.StepActive: "[>]", state.StepPending: "[ ]", state.StepFailed: "[!]", state.StepSkipped: "[-]"}

// stepColours colour the progress card's steps by status.
var stepColours = map[state.StepStatus]string{
	state.StepDone: ColourGreen, state.StepActive: ColourCyan, state.StepFailed: ColourRed,
	state.StepPending: ColourPlain, state.StepSkipped: ColourPlain,
}

// Step is a step of the progress card with its mark, in its colour.
func (p Palette) Step(s state.Step) string {
	return p.Paint(stepColours[s.Status], stepMarks[s.Status]+" "+s.Name)
}

// AttemptColour is the colour of a's row of the timeline: completed green;
// running cyan; failed red, or yellow when what stopped it leaves the
// choice to a person (the gate blocked it) or it was retried.
func AttemptColour(a state.Attempt) string {
	switch a.Status {
	case state.AttemptCompleted:
		return ColourGreen
	case state.AttemptRunning:
		return ColourCyan
	case state.AttemptFailed, state.AttemptCancelled:
		if r := a.Retry; r != nil && (r.Decision.Next() || r.TechnicallyRetryable && r.Gate != "" && r.Gate != state.GateAllowed) {
			return ColourYellow
		}
		return ColourRed
	}
	return ColourPlain
}

// Timeline is the task's attempt timeline, one row per attempt, each made
// safe to print and in its attempt's colour.
func (p Palette) Timeline(t *state.Task, now time.Time) []string {
	lines := state.Timeline(t, now)
	for i, l := range lines {
		c := ColourPlain
		if i < len(t.Attempts) {
			c = AttemptColour(t.Attempts[i])
		}
		lines[i] = p.Paint(c, Visible(l))
	}
	return lines
}

// Card is the task's progress card, one step a cell, each with its mark
// and in its colour.
func (p Palette) Card(t *state.Task) []string {
	var card []string
	for _, s := range state.ProgressCard(t) {
		card = append(card, p.Step(s))
	}
	return card
}
