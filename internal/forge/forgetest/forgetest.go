// Package forgetest is a local forge for tests: it answers the pull
// request API of GitHub and GitLab on loopback, checking each request as
// the real API does.
package forgetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/edgeagent/agent/internal/forge"
)

// Forge answers the pull (merge) request API as GitHub and GitLab do,
// checking each request the way they would: the path (the project's),
// the token, the media type, the fields; a head branch the repository
// does not have (when HasBranch says) is refused as GitHub and GitLab
// refuse it; one request open per branch (a second is 422 on GitHub, 409
// on GitLab), listed by branch.
type Forge struct {
	Kind    forge.Kind
	Project string // OWNER/NAME, GROUP/…/NAME
	Token   string
	// HasBranch, if set, says whether the forge's repository has a
	// branch: a request whose head it has not is refused.
	HasBranch func(name string) bool

	srv  *httptest.Server
	mu   sync.Mutex
	open map[string]string // head branch → address
	made []map[string]any
}

// Start starts a forge of kind for project, answering with token alone,
// closed when the test ends.
func Start(t testing.TB, kind forge.Kind, project, token string) *Forge {
	f := &Forge{Kind: kind, Project: project, Token: token, open: map[string]string{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

// API is the forge's API base URL: the server's, and /api/v4 on GitLab.
func (f *Forge) API() string {
	if f.Kind == forge.GitLab {
		return f.srv.URL + "/api/v4"
	}
	return f.srv.URL
}

// Made are the bodies of the requests that opened one, in order.
func (f *Forge) Made() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.made...)
}

// Address is the web address the forge gives the request it opens for
// a branch.
func (f *Forge) Address() string { return "https://forge.example/" + f.Project + "/pull/1" }

func (f *Forge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	if r.Header.Get("Authorization") != "Bearer "+f.Token {
		reply(http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var path, head, base string
	switch f.Kind {
	case forge.GitHub:
		path = "/repos/" + f.Project + "/pulls"
		if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") == "" {
			reply(http.StatusBadRequest, map[string]any{"message": "want the GitHub media type and API version"})
			return
		}
	case forge.GitLab:
		path = "/api/v4/projects/" + url.PathEscape(f.Project) + "/merge_requests"
	}
	if r.URL.EscapedPath() != path {
		reply(http.StatusNotFound, map[string]any{"message": "Not Found: " + r.URL.EscapedPath()})
		return
	}
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		head = q.Get("source_branch")
		if f.Kind == forge.GitHub {
			_, head, _ = strings.Cut(q.Get("head"), ":")
		}
		var list []map[string]any
		if addr, ok := f.open[head]; ok {
			list = append(list, map[string]any{"html_url": addr, "web_url": addr})
		}
		reply(http.StatusOK, list)
		return
	}
	if r.Method != http.MethodPost {
		reply(http.StatusMethodNotAllowed, map[string]any{"message": "Method Not Allowed"})
		return
	}
	var in map[string]any
	if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&in) != nil {
		reply(http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	title, _ := in["title"].(string)
	switch f.Kind {
	case forge.GitHub:
		head, _ = in["head"].(string)
		base, _ = in["base"].(string)
	case forge.GitLab:
		head, _ = in["source_branch"].(string)
		base, _ = in["target_branch"].(string)
	}
	if title == "" || head == "" || base == "" {
		reply(http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"message": "title, head and base are required"}}})
		return
	}
	if f.HasBranch != nil && (!f.HasBranch(head) || !f.HasBranch(base)) {
		if f.Kind == forge.GitHub {
			reply(http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"message": "head or base invalid: " + head}}})
		} else {
			reply(http.StatusUnprocessableEntity, map[string]any{"message": []string{"Source branch does not exist"}})
		}
		return
	}
	if _, ok := f.open[head]; ok {
		if f.Kind == forge.GitHub {
			reply(http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"message": "A pull request already exists for " + head + "."}}})
		} else {
			reply(http.StatusConflict, map[string]any{"message": []string{"Another open merge request already exists for this source branch: !1"}})
		}
		return
	}
	addr := f.Address()
	f.open[head] = addr
	f.made = append(f.made, in)
	reply(http.StatusCreated, map[string]any{"html_url": addr, "web_url": addr, "number": 1, "iid": 1})
}
