package notify

import (
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
)

func TestTargetCheck(t *testing.T) {
	ok := Target{Name: "hooks", Kind: Webhook, URL: "https://hooks.example.com/agent", Secret: testSecret}
	for _, c := range []struct {
		name string
		edit func(*Target)
		want string // "" for none
	}{
		{"good", func(*Target) {}, ""},
		{"slack", func(t *Target) { t.Kind, t.Secret = Slack, nil }, ""},
		{"ntfy with a token", func(t *Target) { t.Kind, t.Secret, t.Token = Ntfy, nil, "tk_x" }, ""},
		{"events", func(t *Target) { t.Events = []api.NotifyEvent{api.NotifyFailed} }, ""},
		{"name with capitals", func(t *Target) { t.Name = "Hooks" }, `target name "Hooks": want lower-case letters`},
		{"empty name", func(t *Target) { t.Name = "" }, `target name "": want`},
		{"unknown kind", func(t *Target) { t.Kind = "email" }, `target hooks: type "email": want webhook, slack or ntfy`},
		{"relative URL", func(t *Target) { t.URL = "/agent" }, "target hooks: URL (not absolute): want an absolute http:// or https:// URL"},
		{"ftp URL", func(t *Target) { t.URL = "ftp://h/x" }, "target hooks: URL ftp://h/…: want an absolute"},
		{"password in the URL", func(t *Target) { t.URL = "https://u:SECRET@h/x" }, "target hooks: URL https://h/…: a user or password"},
		{"short secret", func(t *Target) { t.Secret = []byte("short") }, "target hooks: a webhook needs a secret of at least 32 bytes, has 5"},
		{"unknown event", func(t *Target) { t.Events = []api.NotifyEvent{"task.done"} }, `target hooks: unknown event "task.done": want task.awaiting_reply, task.approval_expired, task.completed`},
		{"token on a webhook", func(t *Target) { t.Token = "x" }, "target hooks: a token is for ntfy, not webhook"},
	} {
		target := ok
		c.edit(&target)
		err := target.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want %s…", c.name, err, c.want)
		case err != nil && strings.Contains(err.Error(), "SECRET"):
			t.Errorf("%s: %v holds the secret", c.name, err)
		}
	}
	if err := CheckTargets([]Target{ok, ok}); err == nil || err.Error() != "two targets are named hooks" {
		t.Errorf("two targets of one name: %v", err)
	}
}

func TestWants(t *testing.T) {
	all := Target{Name: "a"}
	some := Target{Name: "b", Events: []api.NotifyEvent{api.NotifyFailed}}
	for _, c := range []struct {
		t    Target
		e    api.NotifyEvent
		want bool
	}{
		{all, api.NotifyCompleted, true},
		{some, api.NotifyFailed, true},
		{some, api.NotifyCompleted, false},
		{some, api.NotifyTest, true},
	} {
		if got := c.t.Wants(c.e); got != c.want {
			t.Errorf("%s wants %s: %v", c.t.Name, c.e, got)
		}
	}
}
