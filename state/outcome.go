package state

import (
	"fmt"
	"strings"
)

// ResultLine says what a task that ended came to, in a line, for a list
// that shows it where a running task shows its progress: a completed
// task's summary (its first line), else what it changed ("+12 -4 in 3
// files"), else "completed"; why any other ended (its reason, else its
// last attempt's error), after its phase. "" for a task that has not
// ended: its progress is what it stands at.
func ResultLine(t *Task) string {
	if !t.Phase.Terminal() {
		return ""
	}
	if t.Phase == PhaseCompleted {
		if t.Result != nil {
			if s := firstLine(t.Result.Summary); s != "" {
				return s
			}
			if c := t.Result.Changes; c != nil {
				return fmt.Sprintf("+%d -%d in %s", c.Insertions, c.Deletions, fileCount(c.Files))
			}
		}
		return string(PhaseCompleted)
	}
	why := firstLine(t.PhaseReason)
	if why == "" {
		if c := t.Current(); c != nil && c.Error != nil {
			why = firstLine(c.Error.Error())
		}
	}
	switch {
	case why == "":
		return string(t.Phase)
	case strings.HasPrefix(why, string(t.Phase)+":"):
		return why // "cancelled: cancelled by the user" says it once
	}
	return string(t.Phase) + ": " + why
}

// firstLine is s's first line that holds more than white space, trimmed.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
