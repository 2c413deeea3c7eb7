package notify

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgeagent/agent/controlplane/credential"
	"github.com/edgeagent/agent/internal/settings"
)

// TableKeys are the keys of a [[notify]] table, each read into a Target
// by Settings.Targets.
var TableKeys = []settings.TableKey{
	{Name: "name", Default: "", Required: true},
	{Name: "type", Default: "", Required: true},
	{Name: "url", Default: ""},
	{Name: "url-file", Default: "", Path: true},
	{Name: "secret-file", Default: "", Path: true},
	{Name: "token-file", Default: "", Path: true},
	{Name: "events", Default: []string(nil)},
}

// Settings are what a person gives for the notifications: the config
// file's [[notify]] tables, the --notify-webhook targets and their
// secret, and the public URL notifications link to. agent controlplane
// serve and notify test read them alike.
type Settings struct {
	PublicURL  string
	Webhooks   []string // --notify-webhook: one target each
	SecretFile string   // --notify-secret-file: the webhooks' HMAC key
	// Tables are the config file's [[notify]] tables, read from File.
	Tables []settings.FileTable
	File   string
}

// CheckPublicURL refuses a public URL that is not an absolute http or
// https URL.
func (s Settings) CheckPublicURL() error {
	if s.PublicURL == "" {
		return nil
	}
	if err := CheckURL(s.PublicURL); err != nil {
		return usagef("--public-url: %v", err)
	}
	return nil
}

// Targets builds the targets: the [[notify]] tables, then one per
// --notify-webhook, named webhook-1, webhook-2, … and signed with the key
// in SecretFile (else DIR/notify-secret, made if missing when create is
// set). secretWhere says where that key is ("" without webhooks): "in
// DIR/notify-secret". Each mistake is one line holding no secret, a
// settings.UsageError.
func (s Settings) Targets(dir string, create bool) (targets []Target, secretWhere string, err error) {
	names := map[string]bool{}
	for _, tab := range s.Tables {
		t, err := tableTarget(tab, s.File)
		if err != nil {
			return nil, "", err
		}
		if names[t.Name] {
			return nil, "", settings.FileError(s.File, tab.Line("name"), "two [[notify]] targets are named %s", t.Name)
		}
		names[t.Name] = true
		targets = append(targets, t)
	}
	if len(s.Webhooks) == 0 {
		return targets, "", nil
	}
	secret, where, err := s.secret(dir, create)
	if err != nil {
		return nil, "", err
	}
	for i, u := range s.Webhooks {
		t := Target{Name: fmt.Sprintf("webhook-%d", i+1), Kind: Webhook, URL: u, Secret: []byte(secret)}
		if names[t.Name] {
			return nil, "", usagef("--notify-webhook: a [[notify]] target is named %s already", t.Name)
		}
		if err := CheckURL(u); err != nil {
			return nil, "", usagef("--notify-webhook: %v", err)
		}
		names[t.Name] = true
		targets = append(targets, t)
	}
	return targets, where, nil
}

func usagef(format string, args ...any) error {
	return settings.UsageError{Err: fmt.Errorf(format, args...)}
}

// secret is the --notify-webhook targets' HMAC key: SecretFile's, else
// DIR/notify-secret's, made if missing when create is set; and where it
// is.
func (s Settings) secret(dir string, create bool) (secret, where string, err error) {
	if s.SecretFile != "" {
		secret, err = credential.ReadTokenFile("notify secret file", s.SecretFile, true)
		return secret, "in " + s.SecretFile, err
	}
	path := filepath.Join(dir, "notify-secret")
	if create {
		return credential.Own("notify secret", path)
	}
	secret, err = credential.ReadTokenFile("notify secret", path, true)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", usagef("notify secret %s does not exist: agent controlplane serve makes it; or give --notify-secret-file", path)
	}
	return secret, "in " + path, err
}

// tableTarget is a [[notify]] table's target, its secrets read from
// their files. A mistake is said with the file's line.
func tableTarget(tab settings.FileTable, file string) (Target, error) {
	name := tab.Str("name")
	bad := func(key, format string, args ...any) error {
		return settings.FileError(file, tab.Line(key), "[[notify]] %s: %s", name, fmt.Sprintf(format, args...))
	}
	t := Target{Name: name, Kind: Kind(tab.Str("type"))}
	if !slices.Contains(Kinds, t.Kind) {
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
		b, err := credential.ReadSecretFile("url-file", uf, true)
		if err != nil {
			return t, bad("url-file", "%v", err)
		}
		t.URL = strings.TrimSpace(string(b))
	}
	if err := CheckURL(t.URL); err != nil {
		key := "url"
		if tab.Str("url") == "" {
			key = "url-file"
		}
		return t, bad(key, "%v", err)
	}
	for _, e := range tab.List("events") {
		ev, err := ParseEvent(e)
		if err != nil {
			return t, bad("events", "%v", err)
		}
		t.Events = append(t.Events, ev)
	}
	secretFile, tokenFile := tab.Str("secret-file"), tab.Str("token-file")
	switch {
	case t.Kind == Webhook && secretFile == "":
		return t, bad("name", "a webhook needs secret-file: a file holding its HMAC key, %d characters or more (openssl rand -hex 32)", MinSecretLen)
	case t.Kind != Webhook && secretFile != "":
		return t, bad("secret-file", "secret-file is for a webhook, not %s", t.Kind)
	case t.Kind != Ntfy && tokenFile != "":
		return t, bad("token-file", "token-file is for ntfy, not %s", t.Kind)
	}
	if secretFile != "" {
		secret, err := credential.ReadTokenFile("secret-file", secretFile, true)
		if err != nil {
			return t, bad("secret-file", "%v", err)
		}
		t.Secret = []byte(secret)
	}
	if tokenFile != "" {
		b, err := credential.ReadSecretFile("token-file", tokenFile, true)
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
