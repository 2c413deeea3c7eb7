package mdlinks

import (
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Configuration: flags, environment, config file", "configuration-flags-environment-config-file"},
		{"Tasks: what they reach", "tasks-what-they-reach"},
		{"`agent doctor`", "agent-doctor"},
		{"Issue 13's targets", "issue-13s-targets"},
		{"Runs between, 13:44 and 14:24 UTC", "runs-between-1344-and-1424-utc"},
		{"exec", "exec"},
		{"The [outbox](outbox.md) in operation", "the-outbox-in-operation"},
		{"snake_case and hy-phen", "snake_case-and-hy-phen"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestCheckFindsBrokenLinks(t *testing.T) {
	broken, err := Check("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range broken {
		got = append(got, b.String())
	}
	want := []string{
		"README.md:6: docs/gone.md: no such file or directory",
		"README.md:6: docs/guide.md#no-such-part: no heading with anchor #no-such-part",
		"README.md:7: #nowhere: no heading with anchor #nowhere",
		"README.md:16: docs/gone-too.md: no such file or directory",
		"docs/guide.md:14: #again-2: no heading with anchor #again-2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRepository holds the repository's own documents to it: every link
// between them, and every anchor, leads somewhere.
func TestRepository(t *testing.T) {
	broken, err := Check("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Errorf("broken link: %s", b)
	}
}
