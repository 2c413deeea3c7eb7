package mockmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is what the mock recorded of one model request.
type Request struct {
	API        string // "openai" or "anthropic"
	Model      string
	Scenario   string
	ToolResult bool // the request carried a tool result
	Stream     bool
	At         time.Time
}

// Server is a running mock.
type Server struct {
	ln      net.Listener
	srv     *http.Server
	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup

	mu       sync.Mutex
	requests []Request
	counter  int
}

// Start starts a mock on 127.0.0.1 on a free port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, closing: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", s.openai)
	mux.HandleFunc("POST /v1/messages", s.anthropic)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			return // Claude Code's reachability checks
		}
		http.NotFound(w, r)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the mock's base URL, http://127.0.0.1:PORT (Anthropic's base).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// OpenAIBaseURL is the base URL an OpenAI client takes: URL + "/v1".
func (s *Server) OpenAIBaseURL() string { return s.URL() + "/v1" }

// Requests returns the requests so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Close ends every request in progress and stops the mock.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		_ = s.srv.Close()
		s.wg.Wait()
	})
}

// record logs a request and returns a number for ids.
func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.At = time.Now()
	s.requests = append(s.requests, r)
	s.counter++
	return s.counter
}

// wait blocks until the client goes away or the mock closes.
func (s *Server) wait(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
}

// prompt is what a request says about its scenario.
type prompt struct {
	scenario   string
	command    string
	toolResult bool
	cwd        string
}

// readPrompt decodes a request body and finds the scenario for model.
func readPrompt(r *http.Request, model *string, stream *bool) (prompt, map[string]any, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return prompt{}, nil, err
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		return prompt{}, nil, fmt.Errorf("body is not JSON: %w", err)
	}
	*model, _ = req["model"].(string)
	*stream, _ = req["stream"].(bool)
	var p prompt
	var line string
	walk(req["input"], &p, &line)
	walk(req["messages"], &p, &line)
	if sys, ok := req["system"]; ok {
		var ignored string
		walk(sys, &prompt{}, &ignored)
		p.cwd = findCwd(sys)
	}
	p.scenario = pick(line, *model)
	if p.toolResult {
		p.scenario = afterTool(line)
	}
	return p, req, nil
}

// walk visits the strings of a request's messages: the last "mock:" line
// and "mock-cmd:" line win; a tool result is noted.
func walk(v any, p *prompt, line *string) {
	switch x := v.(type) {
	case map[string]any:
		switch x["type"] {
		case "function_call_output", "custom_tool_call_output", "tool_result":
			p.toolResult = true
		}
		for _, e := range x {
			walk(e, p, line)
		}
	case []any:
		for _, e := range x {
			walk(e, p, line)
		}
	case string:
		for _, l := range strings.Split(x, "\n") {
			l = strings.TrimSpace(l)
			if rest, ok := strings.CutPrefix(l, "mock:"); ok {
				*line = strings.TrimSpace(rest)
			}
			if rest, ok := strings.CutPrefix(l, "mock-cmd:"); ok {
				p.command = strings.TrimSpace(rest)
			}
		}
	}
}

// findCwd finds the working directory Claude Code states in its system
// prompt ("Working directory: /path").
func findCwd(v any) string {
	var found string
	var visit func(any)
	visit = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				visit(e)
			}
		case []any:
			for _, e := range x {
				visit(e)
			}
		case string:
			for _, l := range strings.Split(x, "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "Working directory:"); ok && found == "" {
					found = strings.TrimSpace(rest)
				}
			}
		}
	}
	visit(v)
	return found
}

// pick chooses the scenario for model from a "mock:" line: a bare name
// applies to every model, MODEL=NAME to one.
func pick(line, model string) string {
	scenario := "text"
	for _, f := range strings.Fields(line) {
		if m, name, ok := strings.Cut(f, "="); ok {
			if m == model && m != "after" {
				return name
			}
			continue
		}
		scenario = f
	}
	return scenario
}

// afterTool is the scenario of a request that carries a tool result:
// "after=NAME" on the mock line, else the final text.
func afterTool(line string) string {
	for _, f := range strings.Fields(line) {
		if name, ok := strings.CutPrefix(f, "after="); ok {
			return name
		}
	}
	return "final"
}

// Parse is pick, exported for tests of the syntax.
func Parse(line, model string) string { return pick(line, model) }

// defaultCommand is what the shell scenario runs without a mock-cmd line.
const defaultCommand = "echo mock-side-effect > mock_side_effect.txt"

// finalText is the answer to a request that carries a tool result.
const finalText = "Done: the tool ran."

// helloText is the text scenario's answer.
const helloText = "Hello from the mock model."

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (e *sse) send(event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, b)
	if e.f != nil {
		e.f.Flush()
	}
}

// cut ends the connection without a proper end of stream.
func cut(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// jsonError answers an HTTP error with a JSON body.
func jsonError(w http.ResponseWriter, status int, retryAfter string, body any) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// chunks splits text into a few deltas.
func chunks(text string) []string {
	var out []string
	for len(text) > 0 {
		n := min(9, len(text))
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}
