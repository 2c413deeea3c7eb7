// Package forge opens the pull request (GitHub) or merge request (GitLab)
// that brings a task's branch to a person: one request to the forge's
// API, with the task's title, summary, link and diffstat. It is
// idempotent: a request for a branch that already has one open answers
// that one's address, so that a retry (agent tasks push) never opens two.
//
// The token comes from the agent's environment and goes to the forge's
// API only: never to a task, a log or an error.
package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Kind is a forge's API: github or gitlab.
type Kind string

// The forges.
const (
	GitHub Kind = "github"
	GitLab Kind = "gitlab"
)

// Kinds lists the forges, for flags and errors.
var Kinds = []Kind{GitHub, GitLab}

// Default API base URLs and token variables, by forge.
var (
	DefaultAPI      = map[Kind]string{GitHub: "https://api.github.com", GitLab: "https://gitlab.com/api/v4"}
	DefaultTokenEnv = map[Kind]string{GitHub: "GITHUB_TOKEN", GitLab: "GITLAB_TOKEN"}
)

// Forge is where pull requests are opened: the API, the project and the
// token.
type Forge struct {
	Kind Kind
	// API is the API's base URL (https://api.github.com,
	// https://gitlab.example.com/api/v4).
	API string
	// Project is the repository on the forge: OWNER/NAME on GitHub, the
	// project's path (GROUP/SUBGROUP/NAME) on GitLab.
	Project string
	// Token authenticates to the API. It is never logged.
	Token string
	// Client is the HTTP client; nil is one with a 30 s timeout.
	Client *http.Client
}

// Request is the pull request to open: Head (the task's branch) into Base.
type Request struct {
	Head, Base  string
	Title, Body string
}

// ErrForge marks the forge's refusal (its status and message, said in one
// line); other errors are the network's.
var ErrForge = errors.New("the forge refused")

// Open opens the pull request r asks for, or finds the one open already
// for its branch, and returns its address (the web page a person opens).
func (f Forge) Open(ctx context.Context, r Request) (string, error) {
	if f.Token == "" {
		return "", errors.New("no token for the forge's API")
	}
	switch f.Kind {
	case GitHub:
		return f.github(ctx, r)
	case GitLab:
		return f.gitlab(ctx, r)
	}
	return "", fmt.Errorf("forge %q: want github or gitlab", f.Kind)
}

func (f Forge) github(ctx context.Context, r Request) (string, error) {
	owner, _, ok := strings.Cut(f.Project, "/")
	if !ok {
		return "", fmt.Errorf("project %q: want OWNER/NAME", f.Project)
	}
	base := "/repos/" + f.Project + "/pulls"
	var made struct {
		HTMLURL string `json:"html_url"`
	}
	status, err := f.call(ctx, http.MethodPost, base, map[string]any{"title": r.Title, "head": r.Head, "base": r.Base, "body": r.Body}, &made)
	if err == nil {
		return made.HTMLURL, nil
	}
	if status != http.StatusUnprocessableEntity {
		return "", err
	}
	// 422: perhaps one is open for the branch already (a retry).
	var open []struct {
		HTMLURL string `json:"html_url"`
	}
	q := url.Values{"head": {owner + ":" + r.Head}, "base": {r.Base}, "state": {"open"}}
	if _, err2 := f.call(ctx, http.MethodGet, base+"?"+q.Encode(), nil, &open); err2 == nil && len(open) > 0 {
		return open[0].HTMLURL, nil
	}
	return "", err
}

func (f Forge) gitlab(ctx context.Context, r Request) (string, error) {
	base := "/projects/" + url.PathEscape(f.Project) + "/merge_requests"
	var made struct {
		WebURL string `json:"web_url"`
	}
	status, err := f.call(ctx, http.MethodPost, base, map[string]any{"source_branch": r.Head, "target_branch": r.Base, "title": r.Title, "description": r.Body}, &made)
	if err == nil {
		return made.WebURL, nil
	}
	if status != http.StatusConflict {
		return "", err
	}
	// 409: one is open for the branch already (a retry).
	var open []struct {
		WebURL string `json:"web_url"`
	}
	q := url.Values{"source_branch": {r.Head}, "target_branch": {r.Base}, "state": {"opened"}}
	if _, err2 := f.call(ctx, http.MethodGet, base+"?"+q.Encode(), nil, &open); err2 == nil && len(open) > 0 {
		return open[0].WebURL, nil
	}
	return "", err
}

// call makes one request of the API and decodes its answer into out; a
// refusal is ErrForge with the status and the forge's message.
func (f Forge) call(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(f.API, "/")+path, body)
	if err != nil {
		return 0, fmt.Errorf("forge API %s: %v", f.API, err)
	}
	req.Header.Set("Authorization", "Bearer "+f.Token)
	req.Header.Set("User-Agent", "edgeagent")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.Kind == GitHub {
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	}
	c := f.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	// A redirect would carry the token elsewhere: refused.
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := cc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("forge API %s: %w", redact(f.API), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%w: %s %s answered %s: %s", ErrForge, method, strings.TrimSuffix(redact(f.API), "/")+strings.SplitN(path, "?", 2)[0], resp.Status, message(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("forge API %s: an answer that does not read: %v", redact(f.API), err)
	}
	return resp.StatusCode, nil
}

// message is the forge's error message from its answer, in one line.
func message(b []byte) string {
	var e struct {
		Message any `json:"message"`
		Errors  []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(b, &e) == nil && e.Message != nil {
		msg := fmt.Sprint(e.Message)
		for _, x := range e.Errors {
			if x.Message != "" {
				msg += "; " + x.Message
			}
		}
		return oneLine(msg, 300)
	}
	return oneLine(string(b), 300)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// redact drops a user and password from a URL, for errors.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an API URL that does not parse)"
	}
	return u.Redacted()
}

// remotePattern reads a project's path from a remote's URL:
// git@host:OWNER/NAME.git, ssh://git@host[:port]/OWNER/NAME.git,
// https://host/OWNER/NAME(.git).
var remotePattern = regexp.MustCompile(`^(?:[a-z+]+://(?:[^@/]+@)?[^/]+/|[^@/]+@[^:/]+:)(.+?)(?:\.git)?/?$`)

// ProjectOf is the project a remote's URL names, OWNER/NAME (GitLab:
// GROUP/…/NAME), or "" when the URL names none (a local path).
func ProjectOf(remoteURL string) string {
	m := remotePattern.FindStringSubmatch(strings.TrimSpace(remoteURL))
	if m == nil || !strings.Contains(m[1], "/") {
		return ""
	}
	return m[1]
}
