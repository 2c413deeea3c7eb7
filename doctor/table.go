package doctor

import (
	"fmt"
	"io"
	"strings"

	"github.com/edgeagent/agent/internal/taskview"
)

// resultColor is the SGR color of each result.
var resultColor = map[CheckResult]string{CheckPass: "32", CheckWarn: "33", CheckFail: "31", CheckSkip: "90"}

// WriteTable writes the checks as agent doctor shows them: a table, then
// the fixes of those that warned or failed, then a summary line; the
// results colored when color is set. What a check says of paths and
// answers is shown, never obeyed (taskview.Visible).
func WriteTable(w io.Writer, checks []Check, color bool) error {
	nameWidth := len("CHECK")
	for _, c := range checks {
		nameWidth = max(nameWidth, len(c.Name))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-6s  %s\n", nameWidth, "CHECK", "RESULT", "DETAIL")
	count := map[CheckResult]int{}
	var fixes []Check
	for _, c := range checks {
		count[c.Result]++
		result := fmt.Sprintf("%-6s", c.Result) // padded before coloring, so the columns stay aligned
		if color {
			result = "\x1b[" + resultColor[c.Result] + "m" + result + "\x1b[0m"
		}
		fmt.Fprintf(&b, "%-*s  %s  %s\n", nameWidth, c.Name, result, taskview.Visible(c.Detail))
		if c.Fix != "" {
			fixes = append(fixes, c)
		}
	}
	if len(fixes) > 0 {
		b.WriteString("\nto fix:\n")
		for _, c := range fixes {
			fmt.Fprintf(&b, "  %-*s  %s\n", nameWidth, c.Name, taskview.Visible(c.Fix))
		}
	}
	b.WriteString("\n")
	switch {
	case count[CheckFail] > 0:
		fmt.Fprintf(&b, "%d of %d checks failed, %d warned\n", count[CheckFail], len(checks), count[CheckWarn])
	case count[CheckWarn] > 0:
		fmt.Fprintf(&b, "no check failed; %d warned\n", count[CheckWarn])
	case count[CheckSkip] > 0:
		fmt.Fprintf(&b, "all %d checks passed, %d skipped\n", count[CheckPass], count[CheckSkip])
	default:
		fmt.Fprintf(&b, "all %d checks passed\n", count[CheckPass])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
