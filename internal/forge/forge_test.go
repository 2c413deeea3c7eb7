package forge_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/forge"
	"github.com/edgeagent/agent/internal/forge/forgetest"
)

const token = "ghp_test0123456789abcdef"

func TestOpen(t *testing.T) {
	for _, c := range []struct {
		kind         forge.Kind
		project      string
		headF, bodyF string
	}{
		{forge.GitHub, "octo/app", "head", "body"},
		{forge.GitLab, "group/sub/app", "source_branch", "description"},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			fake := forgetest.Start(t, c.kind, c.project, token)
			f := forge.Forge{Kind: c.kind, API: fake.API(), Project: c.project, Token: token}
			req := forge.Request{Head: "agent/t-1", Base: "main", Title: "Fix the footer", Body: "Summary.\n\n+3 -1 in 2 files"}
			addr, err := f.Open(context.Background(), req)
			if err != nil || addr != fake.Address() {
				t.Fatalf("open: %q, %v", addr, err)
			}
			if made := fake.Made(); len(made) != 1 || made[0][c.headF] != "agent/t-1" || made[0][c.bodyF] != req.Body || made[0]["title"] != req.Title {
				t.Errorf("the request the forge got: %v", made)
			}
			// Again (agent tasks push retried): the same address, none more.
			if addr2, err := f.Open(context.Background(), req); err != nil || addr2 != addr || len(fake.Made()) != 1 {
				t.Errorf("open again: %q, %v, %d made", addr2, err, len(fake.Made()))
			}
			// A wrong token: the forge's refusal, in one line, without it.
			f.Token = "wrong-token-value"
			_, err = f.Open(context.Background(), forge.Request{Head: "agent/t-2", Base: "main", Title: "x"})
			if !errors.Is(err, forge.ErrForge) || !strings.Contains(err.Error(), "401 Unauthorized: Bad credentials") || strings.Contains(err.Error(), "wrong-token-value") || strings.Contains(err.Error(), "\n") {
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
	_, err := forge.Forge{Kind: forge.GitHub, API: srv.URL, Project: "octo/app", Token: token}.Open(context.Background(), forge.Request{Head: "h", Base: "b", Title: "t"})
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
		if got := forge.ProjectOf(in); got != want {
			t.Errorf("ProjectOf(%q) = %q, want %q", in, got, want)
		}
	}
}
