package forge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const token = "ghp_test0123456789abcdef"

// fakeForge answers the pull request API as GitHub and GitLab do, checking
// each request the way they would: the path, the token, the media type,
// the fields; one request open per branch (a second is 422 on GitHub, 409
// on GitLab), listed by branch.
type fakeForge struct {
	t    *testing.T
	kind Kind
	mu   sync.Mutex
	open map[string]string // head branch → address
	made []map[string]any
}

func (f *fakeForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	if r.Header.Get("Authorization") != "Bearer "+token {
		reply(http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var path, head, base string
	switch f.kind {
	case GitHub:
		path = "/repos/octo/app/pulls"
		if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") == "" {
			reply(http.StatusBadRequest, map[string]any{"message": "want the GitHub media type and API version"})
			return
		}
	case GitLab:
		path = "/api/v4/projects/group%2Fsub%2Fapp/merge_requests"
	}
	if r.URL.EscapedPath() != path {
		reply(http.StatusNotFound, map[string]any{"message": "Not Found: " + r.URL.EscapedPath()})
		return
	}
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		head = q.Get("source_branch")
		if f.kind == GitHub {
			_, head, _ = strings.Cut(q.Get("head"), ":")
		}
		var list []map[string]any
		if addr, ok := f.open[head]; ok {
			list = append(list, map[string]any{"html_url": addr, "web_url": addr})
		}
		reply(http.StatusOK, list)
		return
	}
	var in map[string]any
	if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&in) != nil {
		reply(http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	title, _ := in["title"].(string)
	switch f.kind {
	case GitHub:
		head, _ = in["head"].(string)
		base, _ = in["base"].(string)
	case GitLab:
		head, _ = in["source_branch"].(string)
		base, _ = in["target_branch"].(string)
	}
	if title == "" || head == "" || base == "" {
		reply(http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"message": "title, head and base are required"}}})
		return
	}
	if _, ok := f.open[head]; ok {
		if f.kind == GitHub {
			reply(http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"message": "A pull request already exists for octo:" + head + "."}}})
		} else {
			reply(http.StatusConflict, map[string]any{"message": []string{"Another open merge request already exists for this source branch: !1"}})
		}
		return
	}
	addr := "https://forge.example/octo/app/pull/1"
	f.open[head] = addr
	f.made = append(f.made, in)
	reply(http.StatusCreated, map[string]any{"html_url": addr, "web_url": addr, "number": 1, "iid": 1})
}

func TestOpen(t *testing.T) {
	for _, c := range []struct {
		kind         Kind
		api, project string
		headF, bodyF string
	}{
		{GitHub, "", "octo/app", "head", "body"},
		{GitLab, "/api/v4", "group/sub/app", "source_branch", "description"},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			fake := &fakeForge{t: t, kind: c.kind, open: map[string]string{}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			f := Forge{Kind: c.kind, API: srv.URL + c.api, Project: c.project, Token: token}
			req := Request{Head: "agent/t-1", Base: "main", Title: "Fix the footer", Body: "Summary.\n\n+3 -1 in 2 files"}
			addr, err := f.Open(context.Background(), req)
			if err != nil || addr != "https://forge.example/octo/app/pull/1" {
				t.Fatalf("open: %q, %v", addr, err)
			}
			if len(fake.made) != 1 || fake.made[0][c.headF] != "agent/t-1" || fake.made[0][c.bodyF] != req.Body || fake.made[0]["title"] != req.Title {
				t.Errorf("the request the forge got: %v", fake.made)
			}
			// Again (agent tasks push retried): the same address, none more.
			if addr2, err := f.Open(context.Background(), req); err != nil || addr2 != addr || len(fake.made) != 1 {
				t.Errorf("open again: %q, %v, %d made", addr2, err, len(fake.made))
			}
			// A wrong token: the forge's refusal, in one line, without it.
			f.Token = "wrong-token-value"
			_, err = f.Open(context.Background(), Request{Head: "agent/t-2", Base: "main", Title: "x"})
			if !errors.Is(err, ErrForge) || !strings.Contains(err.Error(), "401 Unauthorized: Bad credentials") || strings.Contains(err.Error(), "wrong-token-value") || strings.Contains(err.Error(), "\n") {
				t.Errorf("a wrong token: %v", err)
			}
		})
	}
}

// A redirect is not followed: it would carry the token to another host.
func TestOpenRefusesRedirects(t *testing.T) {
	got := make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Authorization") }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	_, err := Forge{Kind: GitHub, API: srv.URL, Project: "octo/app", Token: token}.Open(context.Background(), Request{Head: "h", Base: "b", Title: "t"})
	if err == nil {
		t.Fatal("a redirect was taken for an answer")
	}
	select {
	case auth := <-got:
		t.Fatalf("the redirect was followed with %q", auth)
	default:
	}
}

func TestProjectOf(t *testing.T) {
	for in, want := range map[string]string{
		"git@github.com:octo/app.git":                     "octo/app",
		"https://github.com/octo/app":                     "octo/app",
		"https://github.com/octo/app.git":                 "octo/app",
		"ssh://git@gitlab.example:2222/group/sub/app.git": "group/sub/app",
		"https://user:pw@gitlab.example/group/app/":       "group/app",
		"/srv/git/app.git":                                "",
		"../app":                                          "",
		"https://github.com/app":                          "",
	} {
		if got := ProjectOf(in); got != want {
			t.Errorf("ProjectOf(%q) = %q, want %q", in, got, want)
		}
	}
}
