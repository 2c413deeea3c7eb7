package mockmodel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// sse writes server-sent events, flushing each so the client sees it at
// once.
type sse struct {
	w     io.Writer
	flush func()
	conn  net.Conn // set when the stream owns the connection (startCutSSE)
}

// startSSE answers 200 with an event stream.
func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	e := &sse{w: w, flush: func() { _ = rc.Flush() }}
	e.flush()
	return e
}

// startCutSSE answers 200 with an event stream whose body ends when the
// connection closes (HTTP/1.1 with Connection: close and no length or
// chunking): cut closes it mid-stream, and the client reads a clean end
// of a stream that never completed, as after a proxy or load balancer
// gave up. It takes the connection over from the server.
func startCutSSE(w http.ResponseWriter) (*sse, error) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	buf.Writer = bufio.NewWriter(conn)
	fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n")
	e := &sse{w: buf, flush: func() { _ = buf.Flush() }, conn: conn}
	e.flush()
	return e, nil
}

// send writes one event: its name, and its data as one JSON line.
func (e *sse) send(event string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("mock model: marshal %s: %v", event, err)) // the mock's own values: a bug
	}
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, b)
	e.flush()
}

// data writes one event that is data alone, as the Gemini API streams
// (alt=sse): no event name.
func (e *sse) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("mock model: marshal: %v", err)) // the mock's own values: a bug
	}
	fmt.Fprintf(e.w, "data: %s\r\n\r\n", b)
	e.flush()
}

// cutPause is how long a cut stream stays open after its last event, so
// that the client has handled the events before the connection goes.
const cutPause = 200 * time.Millisecond

// cut closes a stream from startCutSSE after cutPause, or at once when
// the mock closes.
func (s *Server) cut(e *sse) {
	select {
	case <-time.After(cutPause):
	case <-s.closing:
	}
	_ = e.conn.Close()
}

// jsonError answers an HTTP error with a JSON body; retryAfter, when not
// empty, goes in the Retry-After header.
func jsonError(w http.ResponseWriter, status int, retryAfter string, body any) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
