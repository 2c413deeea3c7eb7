package doctor

import (
	"regexp"
	"strings"
	"testing"
)

// On a terminal the results are colored, padded first so that the
// columns stay aligned.
func TestWriteTableColorKeepsColumns(t *testing.T) {
	checks := []Check{
		{Name: CheckConfig, Result: CheckPass, Detail: "fine"},
		{Name: CheckControlPlane, Result: CheckFail, Detail: "down", Fix: "start it"},
		{Name: CheckClock, Result: CheckSkip, Detail: "not asked"},
	}
	var plain, color strings.Builder
	if err := WriteTable(&plain, checks, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&color, checks, true); err != nil {
		t.Fatal(err)
	}
	sgr := regexp.MustCompile(`\x1b\[[0-9]*m`)
	if !strings.Contains(color.String(), "\x1b[31mfail  \x1b[0m") {
		t.Errorf("no red fail in %q", color.String())
	}
	if got := sgr.ReplaceAllString(color.String(), ""); got != plain.String() {
		t.Errorf("colored table without its colors:\n%s\nplain:\n%s", got, plain.String())
	}
	want := "CHECK          RESULT  DETAIL\n" +
		"config         pass    fine\n" +
		"control-plane  fail    down\n" +
		"clock          skip    not asked\n" +
		"\nto fix:\n" +
		"  control-plane  start it\n" +
		"\n1 of 3 checks failed, 0 warned\n"
	if plain.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", plain.String(), want)
	}
}

// The summary line says warnings and skips when nothing failed, and a
// check's text is shown, not obeyed.
func TestWriteTableSummaries(t *testing.T) {
	for _, c := range []struct {
		checks []Check
		want   string
	}{
		{[]Check{{Name: CheckConfig, Result: CheckPass}, {Name: CheckDisk, Result: CheckWarn, Fix: "free some"}}, "no check failed; 1 warned\n"},
		{[]Check{{Name: CheckConfig, Result: CheckPass}, {Name: CheckClock, Result: CheckSkip}}, "all 1 checks passed, 1 skipped\n"},
		{[]Check{{Name: CheckConfig, Result: CheckPass, Detail: "evil\x1b[2Jdir"}}, "all 1 checks passed\n"},
	} {
		var b strings.Builder
		if err := WriteTable(&b, c.checks, false); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(b.String(), "\n"+c.want) || strings.ContainsRune(b.String(), 0x1b) {
			t.Errorf("table %q; want it to end %q, with no escape", b.String(), c.want)
		}
	}
}
