package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/internal/settings"
)

// notifySettings are the notification settings agent controlplane serve
// and notify test share: the config file's [[notify]] tables, the
// --notify-webhook targets and their secret, and the public URL
// notifications link to.
type notifySettings struct {
	publicURL  string
	webhooks   []string
	secretFile string
	// secretWhere says where the --notify-webhook targets' key is, once
	// targets has read it ("" with none): "in DIR/notify-secret".
	secretWhere string
}

func (n *notifySettings) bind(fs *pflag.FlagSet, t *settingsTable) {
	t.bind(fs, "public-url", &n.publicURL)
	t.bind(fs, "notify-webhook", &n.webhooks)
	t.bind(fs, "notify-secret-file", &n.secretFile)
}

// checkPublicURL refuses a --public-url that is not an absolute http or
// https URL.
func (n *notifySettings) checkPublicURL() error {
	if n.publicURL == "" {
		return nil
	}
	if err := notify.CheckURL(n.publicURL); err != nil {
		return usagef("--public-url: %v", err)
	}
	return nil
}

// targets builds the notification targets: the config file's [[notify]]
// tables, then one per --notify-webhook, named webhook-1, webhook-2, …
// and signed with the key in --notify-secret-file (else DIR/notify-secret,
// made if missing when create is set). Each mistake is one line holding no
// secret.
func (n *notifySettings) targets(r *settings.Resolved, dir string, create bool) ([]notify.Target, error) {
	tables, file := r.Tables("notify")
	var out []notify.Target
	names := map[string]bool{}
	for _, tab := range tables {
		t, err := notifyTarget(tab, file)
		if err != nil {
			return nil, err
		}
		if names[t.Name] {
			return nil, settings.FileError(file, tab.Line("name"), "two [[notify]] targets are named %s", t.Name)
		}
		names[t.Name] = true
		out = append(out, t)
	}
	if len(n.webhooks) == 0 {
		return out, nil
	}
	secret, where, err := n.secret(dir, create)
	if err != nil {
		return nil, err
	}
	n.secretWhere = where
	for i, u := range n.webhooks {
		t := notify.Target{Name: fmt.Sprintf("webhook-%d", i+1), Kind: notify.Webhook, URL: u, Secret: []byte(secret)}
		if names[t.Name] {
			return nil, usagef("--notify-webhook: a [[notify]] target is named %s already", t.Name)
		}
		if err := notify.CheckURL(u); err != nil {
			return nil, usagef("--notify-webhook: %v", err)
		}
		names[t.Name] = true
		out = append(out, t)
	}
	return out, nil
}

// secret is the --notify-webhook targets' HMAC key: --notify-secret-file's,
// else DIR/notify-secret's, made if missing when create is set; and
// where it is.
func (n *notifySettings) secret(dir string, create bool) (secret, where string, err error) {
	if n.secretFile != "" {
		secret, err = readTokenFile("notify secret file", n.secretFile, true)
		return secret, "in " + n.secretFile, err
	}
	path := filepath.Join(dir, "notify-secret")
	if create {
		return ownToken("notify secret", path)
	}
	secret, err = readTokenFile("notify secret", path, true)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", usagef("notify secret %s does not exist: agent controlplane serve makes it; or give --notify-secret-file", path)
	}
	return secret, "in " + path, err
}

// notifyTarget is a [[notify]] table's target, its secrets read from
// their files. A mistake is said with the file's line.
func notifyTarget(tab settings.FileTable, file string) (notify.Target, error) {
	name := tab.Str("name")
	bad := func(key, format string, args ...any) error {
		return settings.FileError(file, tab.Line(key), "[[notify]] %s: %s", name, fmt.Sprintf(format, args...))
	}
	t := notify.Target{Name: name, Kind: notify.Kind(tab.Str("type"))}
	if !slices.Contains(notify.Kinds, t.Kind) {
		return t, bad("type", "type %q: want webhook, slack or ntfy", t.Kind)
	}
	switch u, uf := tab.Str("url"), tab.Str("url-file"); {
	case u != "" && uf != "":
		return t, bad("url-file", "give url or url-file, not both")
	case u == "" && uf == "":
		return t, bad("name", "has no url or url-file")
	case u != "":
		t.URL = u
	default:
		b, err := readSecretFile("url-file", uf, true)
		if err != nil {
			return t, bad("url-file", "%v", err)
		}
		t.URL = strings.TrimSpace(string(b))
	}
	if err := notify.CheckURL(t.URL); err != nil {
		key := "url"
		if tab.Str("url") == "" {
			key = "url-file"
		}
		return t, bad(key, "%v", err)
	}
	for _, e := range tab.List("events") {
		ev, err := notify.ParseEvent(e)
		if err != nil {
			return t, bad("events", "%v", err)
		}
		t.Events = append(t.Events, ev)
	}
	secretFile, tokenFile := tab.Str("secret-file"), tab.Str("token-file")
	switch {
	case t.Kind == notify.Webhook && secretFile == "":
		return t, bad("name", "a webhook needs secret-file: a file holding its HMAC key, %d characters or more (openssl rand -hex 32)", notify.MinSecretLen)
	case t.Kind != notify.Webhook && secretFile != "":
		return t, bad("secret-file", "secret-file is for a webhook, not %s", t.Kind)
	case t.Kind != notify.Ntfy && tokenFile != "":
		return t, bad("token-file", "token-file is for ntfy, not %s", t.Kind)
	}
	if secretFile != "" {
		secret, err := readTokenFile("secret-file", secretFile, true)
		if err != nil {
			return t, bad("secret-file", "%v", err)
		}
		t.Secret = []byte(secret)
	}
	if tokenFile != "" {
		b, err := readSecretFile("token-file", tokenFile, true)
		if err != nil {
			return t, bad("token-file", "%v", err)
		}
		t.Token = strings.TrimSpace(string(b))
		if t.Token == "" || strings.ContainsAny(t.Token, " \t\r\n") {
			return t, bad("token-file", "token-file %s does not hold one token", tokenFile)
		}
	}
	if err := t.Check(); err != nil {
		return t, settings.FileError(file, tab.Line("name"), "[[notify]]: %v", err)
	}
	return t, nil
}

// serverTargets are the targets as the server writes records for them.
func serverTargets(ts []notify.Target) []server.NotifyTarget {
	out := make([]server.NotifyTarget, len(ts))
	for i, t := range ts {
		out[i] = server.NotifyTarget{Name: t.Name, Events: slices.Clone(t.Events)}
	}
	return out
}

// logTargets says the targets once at start: "notifications: 2 targets
// (ops-slack, hooks)", and where the --notify-webhook targets' key is.
func logTargets(log *slog.Logger, ts []notify.Target, secretWhere string) {
	if len(ts) == 0 {
		log.Info("notifications: 0 targets")
		return
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	msg := fmt.Sprintf("notifications: %d targets (%s)", len(ts), strings.Join(names, ", "))
	if secretWhere != "" {
		log.Info(msg, "webhook_secret", secretWhere)
		return
	}
	log.Info(msg)
}

// startNotify starts delivering st's notifications to targets, counting
// the tries in counts, under the rate limits of limits (its Window,
// PerSubject and PerTarget), until ctx ends or the function it returns
// is called, which waits for the deliveries in flight.
func startNotify(ctx context.Context, st notify.Store, targets []notify.Target, counts *notify.Counts, log *slog.Logger, limits notify.Options) (stop func()) {
	if len(targets) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		notify.Run(ctx, st, targets, notify.Options{Logger: log, Counts: counts, Window: limits.Window, PerSubject: limits.PerSubject, PerTarget: limits.PerTarget})
	}()
	return func() { cancel(); <-done }
}
