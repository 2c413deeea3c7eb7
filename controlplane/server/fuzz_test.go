package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
)

// Every API body is outside input. Whatever a client posts, the control
// plane answers (never panics) and goes on answering.
func FuzzAPIBodies(f *testing.F) {
	for _, seed := range []string{
		`{"agent_id":"a","events":[{"key":"k","kind":"progress","task_id":"t-1","attempt":1,"lease_id":"l","payload":{"message":"m"}}]}`,
		`{"agent_id":"a","max":2,"health_grade":"available","request_id":"c"}`,
		`{"agent_id":"a","running":[{"task_id":"t-1","attempt":1,"phase":"claimed"}]}`,
		`{"title":"x","prompt":"do it","prefer":"gui","max_attempts":3}`,
		`{"request_id":"r","decision":"accept"}`,
		`{"agent_id":"a","task_ids":["t-1"]}`,
		`{"agent_id":"a","events":[{"key":"k","kind":"complete","task_id":"t-1","payload":{"status":"completed"}}]}`,
		`{"agent_id":"` + string(bytes.Repeat([]byte("a"), 200)) + `"}`,
		`{`, `null`, `[]`, `{"events":null}`,
	} {
		for _, path := range []string{"/v1/events", "/v1/tasks/claim", "/v1/agents/heartbeat", "/v1/tasks", "/v1/tasks/t-1/reply", "/v1/tasks/release"} {
			f.Add(path, []byte(seed))
		}
	}
	srv, err := New(Options{Store: dirStore(f, f.TempDir(), nil), Token: regToken, OperatorTokens: []string{opToken}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	agentTok := ""
	post := func(path string, body []byte) int {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		tok := opToken // a person's endpoints
		switch path {
		case "/v1/agents/register":
			tok = regToken
		case "/v1/events", "/v1/tasks/claim", "/v1/agents/heartbeat", "/v1/tasks/release":
			tok = agentTok // agent a's own
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	post("/v1/tasks", []byte(`{"prompt":"a task to act on"}`))
	reg := httptest.NewRequest(http.MethodPost, "/v1/agents/register", strings.NewReader(`{"agent_id":"a"}`))
	reg.Header.Set("Authorization", "Bearer "+regToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, reg)
	var resp api.RegisterResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Token == "" {
		f.Fatalf("register agent a: %d %s", w.Code, w.Body)
	}
	agentTok = resp.Token
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		switch path {
		case "/v1/events", "/v1/tasks/claim", "/v1/agents/heartbeat", "/v1/tasks", "/v1/tasks/release":
		default:
			path = "/v1/tasks/t-1/reply"
		}
		if code := post(path, body); code == 0 {
			t.Fatal("no answer")
		}
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("the control plane stopped answering: %d", w.Code)
		}
	})
}
