package notify

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"

	"github.com/edgeagent/agent/controlplane/api"
)

// Kind is how a target is spoken to.
type Kind string

// The kinds of target.
const (
	// Webhook: the notification's JSON, signed (package doc).
	Webhook Kind = "webhook"
	// Slack: a Slack incoming webhook's {"text": …}.
	Slack Kind = "slack"
	// Ntfy: an ntfy topic's plain text, with its Title, Click, Tags and
	// Priority headers.
	Ntfy Kind = "ntfy"
)

// Kinds lists every kind.
var Kinds = []Kind{Webhook, Slack, Ntfy}

// MinSecretLen is the shortest HMAC key a webhook takes, in bytes.
const MinSecretLen = 32

// Target is a place notifications go to.
type Target struct {
	// Name names it in the store's records (store.Notification.Target)
	// and in logs: lower-case letters, digits and dashes.
	Name string
	Kind Kind
	// URL is where to POST: the webhook's, Slack's incoming webhook
	// (a secret: whoever has it can post), or the ntfy topic's.
	URL string
	// Events are the events it wants; empty is every one but those a
	// target gets only by naming them (api.NotifyEvent.ByDefault).
	Events []api.NotifyEvent
	// Secret is a webhook's HMAC key, at least MinSecretLen bytes.
	Secret []byte
	// Token is an ntfy access token, sent as Authorization: Bearer;
	// empty for a topic that needs none.
	Token string
}

// String names the target without its secrets or its URL's path.
func (t Target) String() string { return fmt.Sprintf("%s (%s to %s)", t.Name, t.Kind, host(t.URL)) }

// LogValue is the target in a log: its name only.
func (t Target) LogValue() slog.Value { return slog.StringValue(t.Name) }

// Wants reports whether the target takes event e. The test event goes to
// every target.
func (t Target) Wants(e api.NotifyEvent) bool {
	return len(t.Events) == 0 && e.ByDefault() || e == api.NotifyTest || slices.Contains(t.Events, e)
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Check refuses a target that cannot work, in one line that holds no
// secret.
func (t Target) Check() error {
	if !nameRE.MatchString(t.Name) || len(t.Name) > 64 {
		return fmt.Errorf("target name %q: want lower-case letters, digits and dashes (up to 64)", t.Name)
	}
	if !slices.Contains(Kinds, t.Kind) {
		return fmt.Errorf("target %s: type %q: want webhook, slack or ntfy", t.Name, t.Kind)
	}
	if err := CheckURL(t.URL); err != nil {
		return fmt.Errorf("target %s: %w", t.Name, err)
	}
	for _, e := range t.Events {
		if !slices.Contains(api.NotifyEvents, e) || e == api.NotifyTest {
			return fmt.Errorf("target %s: unknown event %q: want %s", t.Name, e, eventList())
		}
	}
	switch {
	case t.Kind == Webhook && len(t.Secret) < MinSecretLen:
		return fmt.Errorf("target %s: a webhook needs a secret of at least %d bytes, has %d", t.Name, MinSecretLen, len(t.Secret))
	case t.Kind != Webhook && len(t.Secret) > 0:
		return fmt.Errorf("target %s: a secret is for a webhook, not %s", t.Name, t.Kind)
	case t.Kind != Ntfy && t.Token != "":
		return fmt.Errorf("target %s: a token is for ntfy, not %s", t.Name, t.Kind)
	}
	return nil
}

// CheckTargets checks each target, and that no two share a name.
func CheckTargets(ts []Target) error {
	seen := map[string]bool{}
	for _, t := range ts {
		if err := t.Check(); err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("two targets are named %s", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// CheckURL refuses a URL that is not absolute http or https. Its error
// names no more of the URL than its scheme and host.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("URL %s: want an absolute http:// or https:// URL", redact(u))
	}
	if u.User != nil {
		return fmt.Errorf("URL %s: a user or password in the URL is not taken (ntfy: use a token)", redact(u))
	}
	return nil
}

// ParseEvent is the event named s, refusing an unknown one.
func ParseEvent(s string) (api.NotifyEvent, error) {
	e := api.NotifyEvent(s)
	if !slices.Contains(api.NotifyEvents, e) || e == api.NotifyTest {
		return "", fmt.Errorf("unknown event %q: want %s", s, eventList())
	}
	return e, nil
}

func eventList() string {
	var s string
	for _, e := range api.NotifyEvents {
		if e == api.NotifyTest {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += string(e)
	}
	return s
}

// host is a URL's host, for a log line or an error: never its path,
// query or user, which may be secret.
func host(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	return u.Host
}

// redact writes a URL's scheme and host only.
func redact(u *url.URL) string {
	if u.Scheme == "" && u.Host == "" {
		return "(not absolute)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
