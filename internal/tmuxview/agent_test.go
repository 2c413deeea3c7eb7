package tmuxview

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckNames(t *testing.T) {
	if err := CheckNames("agent", "my-agent"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ socket, session, want string }{
		{"", "agent", "--tmux-socket"},
		{"../x", "agent", `--tmux-socket "../x": want a name, without /`},
		{"agent", "", "--tmux-session"},
		{"agent", "a:1", `--tmux-session "a:1": want a name, without : or .`},
		{"agent", "a.b", "--tmux-session"},
		{"agent", "a\x1bb", "--tmux-session"},
	} {
		if err := CheckNames(c.socket, c.session); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("CheckNames(%q, %q): %v; want %q", c.socket, c.session, err, c.want)
		}
	}
}

func TestForAgent(t *testing.T) {
	o := ForAgent("/usr/bin/agent", "/var/lib/agent", "s", "agent", 0)
	if o.Linger >= 0 || o.Owner != "/var/lib/agent" || o.Socket != "s" || o.Session != "agent" {
		t.Errorf("options %+v", o)
	}
	if want := []string{"/usr/bin/agent", "tasks", "watch", "--data-dir", "/var/lib/agent"}; !slices.Equal(o.Home, want) {
		t.Errorf("home %q", o.Home)
	}
	// The task id comes after --: one that starts with - is not a flag.
	want := []string{"/usr/bin/agent", "tasks", "logs", "-f", "--attempt", "2", "--data-dir", "/var/lib/agent", "--", "-t"}
	if got := o.Attempt("-t", 2); !slices.Equal(got, want) {
		t.Errorf("attempt %q", got)
	}
	if o := ForAgent("a", "/d", "s", "agent", 5e9); o.Linger != 5e9 {
		t.Errorf("linger %v", o.Linger)
	}
}
