package mockmodel

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// API is the model API a request came in on.
type API string

// The APIs the mock speaks.
const (
	APIOpenAI    API = "openai"    // POST /v1/responses
	APIAnthropic API = "anthropic" // POST /v1/messages
	APIGemini    API = "gemini"    // POST /v1beta/models/MODEL:streamGenerateContent
)

// Request is what the mock recorded of one model request.
type Request struct {
	API        API
	Model      string
	Scenario   Scenario // what the mock answered with
	ToolResult bool     // the request carried a tool result (a model turn after a tool ran)
	Stream     bool     // the client asked for a streamed answer
	At         time.Time
	// Conversation is the texts of the conversation the request carried,
	// oldest first: what the user said (the CLI's own context included)
	// and what the model answered before, so that a test sees whether a
	// continued session carried its earlier turns.
	Conversation []Message
	// Key is the API key the request carried (Authorization's bearer,
	// x-api-key or x-goog-api-key), so that a test sees which credential
	// a CLI used.
	Key string
}

// requestKey is the API key an HTTP request carries, in the header each
// API takes it in.
func requestKey(r *http.Request) string {
	if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return k
	}
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return r.Header.Get("x-goog-api-key")
}

// Role says who said a message of a conversation.
type Role string

// The roles the mock records.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool marks where a tool's result came back (its text is not
	// kept).
	RoleTool Role = "tool"
)

// Message is one text of a conversation: a user's text or the model's
// answer (a message of several text parts is one Message per part).
type Message struct {
	Role Role
	Text string
}

// Said reports whether a message of role in the request's conversation
// contains text.
func (r Request) Said(role Role, text string) bool {
	for _, m := range r.Conversation {
		if m.Role == role && strings.Contains(m.Text, text) {
			return true
		}
	}
	return false
}

// maxBody bounds a request body the mock reads; Claude Code's are about
// 50 KB, Codex's 40 KB.
const maxBody = 64 << 20

// Server is a running mock on 127.0.0.1. Its zero value is not usable;
// call Start.
type Server struct {
	ln      net.Listener
	srv     *http.Server
	serving sync.WaitGroup // Serve's goroutine
	closing chan struct{}  // closed by Close: hanging handlers return
	once    sync.Once

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup // handlers running; Add only under mu while !closed
	requests []Request
	// limitResets is when the usage limit the usage_limit scenario
	// reached resets; zero before it was reached.
	limitResets time.Time

	// UsageLimitReset is how long after the first usage_limit answer the
	// limit resets. Default DefaultUsageLimitReset. Set it before the
	// first request.
	UsageLimitReset time.Duration
}

// DefaultUsageLimitReset is how long the usage_limit scenario's limit
// lasts by default: a few seconds, as a test can wait.
const DefaultUsageLimitReset = 3 * time.Second

// usageLimit reports when the usage limit resets and whether it is
// reached now: from the first usage_limit request on, until
// UsageLimitReset after it.
func (s *Server) usageLimit() (resets time.Time, reached bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.limitResets.IsZero() {
		s.limitResets = now.Add(cmp.Or(s.UsageLimitReset, DefaultUsageLimitReset))
	}
	return s.limitResets, now.Before(s.limitResets)
}

// LimitResets is when the usage limit the usage_limit scenario reached
// resets; zero before it was reached.
func (s *Server) LimitResets() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limitResets
}

// Start starts a mock on 127.0.0.1 on a free port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mock model: %w", err)
	}
	s := &Server{ln: ln, closing: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", s.track(s.openai))
	mux.HandleFunc("POST /v1/messages", s.track(s.anthropic))
	mux.HandleFunc("POST /v1beta/models/{call}", s.track(s.gemini))
	// Claude Code checks that its base URL answers: 2.1.197 with HEAD /,
	// 2.1.330 with HEAD /api/hello.
	mux.HandleFunc("HEAD /{$}", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("HEAD /api/hello", func(http.ResponseWriter, *http.Request) {})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the mock's base URL, http://127.0.0.1:PORT: Anthropic's base
// (ANTHROPIC_BASE_URL) and Gemini's (GOOGLE_GEMINI_BASE_URL).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// OpenAIBaseURL is the base URL an OpenAI client takes: URL + "/v1".
func (s *Server) OpenAIBaseURL() string { return s.URL() + "/v1" }

// Requests returns the model requests so far, in the order they came.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Close stops the mock: hanging requests end at once, their connections
// close, and Close returns when every handler has.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.closing)
		_ = s.srv.Close()
		s.handlers.Wait()
		s.serving.Wait()
	})
}

// track counts a handler in, so that Close can wait for it.
func (s *Server) track(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			http.Error(w, "mock model closed", http.StatusServiceUnavailable)
			return
		}
		s.handlers.Add(1)
		s.mu.Unlock()
		defer s.handlers.Done()
		h(w, r)
	}
}

// record notes a request and returns its number, from 1, for ids.
func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.At = time.Now()
	s.requests = append(s.requests, r)
	return len(s.requests)
}

// wait blocks until the client goes away or the mock closes: the hang
// scenarios. When the mock closes it drops the connection, so that the
// client sees a failure, not an empty answer.
func (s *Server) wait(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closing:
		panic(http.ErrAbortHandler)
	}
}

// decode reads a JSON request body into v.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return fmt.Errorf("read the body: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the body is not the JSON expected: %w", err)
	}
	return nil
}

// part is a content part of either API: {"type": ..., "text": ...}.
type part struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// contentParts reads a message's content, a string or a list of parts.
func contentParts(raw json.RawMessage) []part {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []part{{Type: "text", Text: s}}
	}
	var parts []part
	_ = json.Unmarshal(raw, &parts)
	return parts
}

// errNoTool says the client did not offer the tool a scenario calls: a
// new CLI version renamed it, and the scenario must follow.
var errNoTool = errors.New("the request offers no tool named")

func hasTool(tools []string, name string) error {
	for _, t := range tools {
		if t == name {
			return nil
		}
	}
	return fmt.Errorf("mock: %w %q (tools offered: %v)", errNoTool, name, tools)
}

// chunks splits text into the few deltas a model would stream, of about
// n bytes each, whole characters.
func chunks(text string, n int) []string {
	var out []string
	for len(text) > 0 {
		k := min(n, len(text))
		for k < len(text) && !utf8.RuneStart(text[k]) {
			k++
		}
		out = append(out, text[:k])
		text = text[k:]
	}
	return out
}
