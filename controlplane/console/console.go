package console

import (
	"bytes"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

//go:embed templates/*.html static/*
var files embed.FS

// Options configure the console. Zero fields take the defaults their
// comments give.
type Options struct {
	// Backend is the control plane. Required.
	Backend Backend
	// PublicURL is the address people reach the console at, such as
	// https://cp.example.com: a POST's Origin may be its origin, and when
	// it is https the session cookie is Secure. Empty: the request's own
	// host.
	PublicURL string
	// MaxStreams caps the live streams open at once; past it, a stream is
	// refused (503). Default DefaultMaxStreams.
	MaxStreams int
	// Poll is how often a live stream looks for changes. Default 1 s.
	Poll   time.Duration
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultMaxStreams is Options.MaxStreams' default.
const DefaultMaxStreams = 100

// keepAlive is how often an idle stream sends a comment, so that proxies
// and the browser keep it open.
const keepAlive = 15 * time.Second

// Console is the web console's handler.
type Console struct {
	opts    Options
	backend Backend
	log     *slog.Logger
	now     func() time.Time
	pages   map[string]*template.Template
	streams atomic.Int64
	mux     *http.ServeMux
}

// New returns the console's handler.
func New(opts Options) *Console {
	if opts.Backend == nil {
		panic("console: a backend is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	c := &Console{opts: opts, backend: opts.Backend, log: opts.Logger, now: opts.Now, pages: parsedPages()}
	mux := http.NewServeMux()
	for _, f := range []string{"console.css", "console.js"} {
		mux.HandleFunc("GET /static/"+f, func(w http.ResponseWriter, r *http.Request) { http.ServeFileFS(w, r, files, "static/"+f) })
	}
	mux.HandleFunc("GET /signin", c.signinPage)
	mux.HandleFunc("POST /signin", c.signin)
	mux.HandleFunc("POST /signout", c.post(c.signout))
	mux.HandleFunc("GET /{$}", c.get(c.home))
	mux.HandleFunc("GET /tasks", c.get(c.tasks))
	mux.HandleFunc("GET /tasks/new", c.get(c.newTaskPage))
	mux.HandleFunc("POST /tasks/new", c.post(c.newTask))
	mux.HandleFunc("GET /tasks/{id}", c.get(c.task))
	mux.HandleFunc("GET /tasks/{id}/diff", c.get(c.taskDiff))
	mux.HandleFunc("POST /tasks/{id}/{action}", c.post(c.act))
	mux.HandleFunc("GET /inbox", c.get(c.inbox))
	// A notification's approval links: the link is the credential.
	mux.HandleFunc("GET /approve/{token}", c.approveLink)
	mux.HandleFunc("POST /approve/{token}", c.useLink)
	mux.HandleFunc("GET /agents", c.get(c.agents))
	mux.HandleFunc("GET /events", c.stream)
	c.mux = mux
	return c
}

// ServeHTTP serves the console, with its security headers on every
// answer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// parsedPages are the pages, parsed once: every console shares them (a
// template is safe to execute concurrently).
var parsedPages = sync.OnceValue(parsePages)

// parsePages parses each page with the layout and the fragments.
func parsePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, p := range []string{"signin", "forbidden", "tasks", "task", "inbox", "agents", "newtask", "diff", "approve"} {
		pages[p] = template.Must(template.New(p).ParseFS(files, "templates/layout.html", "templates/fragments.html", "templates/"+p+".html"))
	}
	return pages
}

// view is what every page shows: the head, the header, and the page's
// own Data.
type view struct {
	Title  string
	Nav    string // the header's tab of the page
	Signed bool
	CSRF   string
	Inbox  int // approvals waiting
	Stream string
	Error  string
	Data   any
}

// render writes page with v and status.
func (c *Console) render(w http.ResponseWriter, status int, page string, v view) {
	var b bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.Error("console: rendering a page", "page", page, "err", err)
		http.Error(w, "the console could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fragment renders one of the fragments' templates.
func (c *Console) fragment(name string, data any) (string, error) {
	var b bytes.Buffer
	err := c.pages["tasks"].ExecuteTemplate(&b, name, data)
	return b.String(), err
}

// signed is a page handler given the request's session.
type signed func(w http.ResponseWriter, r *http.Request, s session)

// get serves a page to a signed-in person; anyone else is sent to sign
// in, and back here after.
func (c *Console) get(h signed) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok, err := c.session(r)
		if err != nil {
			c.storeDown(w, r, err)
			return
		}
		if !ok {
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, s)
	}
}

// errStoreDown is what a page says when the store could not tell whether
// its session was signed out.
const errStoreDown = "the control plane's store is unavailable; try again"

// storeDown refuses a request whose session the store could not check:
// 503, the page saying so in one line.
func (c *Console) storeDown(w http.ResponseWriter, r *http.Request, err error) {
	c.log.Error("console: checking a session: the store did not answer", "path", r.URL.Path, "err", err)
	c.render(w, http.StatusServiceUnavailable, "forbidden", view{Title: "Unavailable", Error: errStoreDown})
}

// errCrossSite is the one line a refused POST gets.
const errCrossSite = "forbidden: cross-site request refused"

// post serves a change: only from this site and origin, in a session,
// with the session's CSRF token.
func (c *Console) post(h signed) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if !c.sameOrigin(r) {
			c.forbid(w, r, "a POST from another site or origin")
			return
		}
		s, ok, err := c.session(r)
		if err != nil {
			c.storeDown(w, r, err)
			return
		}
		if !ok {
			c.forbid(w, r, "a POST without a session")
			return
		}
		if err := r.ParseForm(); err != nil || !csrfEqual(r.PostFormValue("csrf"), s.csrf()) {
			c.forbid(w, r, "a POST without the session's CSRF token")
			return
		}
		h(w, r, s)
	}
}

func csrfEqual(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// forbid refuses a POST: 403, the page saying why in one line.
func (c *Console) forbid(w http.ResponseWriter, r *http.Request, why string) {
	c.log.Warn("console: request refused", "why", why, "path", r.URL.Path, "addr", remoteHost(r))
	c.render(w, http.StatusForbidden, "forbidden", view{Title: "Forbidden", Error: errCrossSite})
}

// sameOrigin checks where a POST came from: a browser's Sec-Fetch-Site
// must say same-origin (or none: the person's own doing), and an Origin,
// when sent, must be the console's own: its public URL's, or the
// request's own host.
func (c *Console) sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if p, err := url.Parse(c.opts.PublicURL); err == nil && c.opts.PublicURL != "" && o == p.Scheme+"://"+p.Host {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return o == scheme+"://"+r.Host
}

// remoteHost is the request's remote address without its port.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// safeNext is where to go after signing in: a path of this site, or /.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.HasPrefix(next, "/\\") || u.Scheme != "" || u.Host != "" || strings.ContainsAny(next, "\r\n\\") {
		return "/"
	}
	return next
}

// signinPage serves the sign-in form.
func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "signin", view{Title: "Sign in", Data: safeNext(r.URL.Query().Get("next"))})
}

// signin signs a person in with an operator token: the session cookie,
// then where they were going. An agent's token and the registration
// secret are refused (403), a token nobody holds too (401), and failures
// count against the address as the API's do (429 past the limit).
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !c.sameOrigin(r) {
		c.forbid(w, r, "a sign-in from another site or origin")
		return
	}
	r.ParseForm()
	next := safeNext(r.PostFormValue("next"))
	fail := func(status int, msg string) {
		c.render(w, status, "signin", view{Title: "Sign in", Error: msg, Data: next})
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	id, err := c.backend.Identify(r.Context(), tok, remoteHost(r))
	switch {
	case err != nil:
		c.log.Error("console: sign-in: the store did not answer", "err", err)
		fail(http.StatusServiceUnavailable, errStoreDown)
	case id.Wait > 0:
		secs := int(id.Wait.Seconds() + 0.999)
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		fail(http.StatusTooManyRequests, fmt.Sprintf("too many failed sign-ins from %s; try again in %ds", remoteHost(r), secs))
	case id.Principal == "":
		fail(http.StatusUnauthorized, "wrong token: no operator holds it; use an operator token (the control plane's --operator-token-file, or its DIR/operator-token)")
	case id.Principal == api.PrincipalAgent:
		fail(http.StatusForbidden, "an agent's token cannot sign in; use an operator token")
	case id.Principal == api.PrincipalRegistration:
		fail(http.StatusForbidden, "the registration secret cannot sign in: it only enrols agents; use an operator token")
	case id.Principal != api.PrincipalOperator:
		fail(http.StatusForbidden, "only an operator token signs in")
	default:
		key := c.backend.SessionKey(id.Operator)
		if key == nil {
			fail(http.StatusForbidden, "only an operator token signs in")
			return
		}
		s, value := newSession(id.Operator, key, c.now())
		c.setCookie(w, r, value, s.expires)
		c.log.Info("console: signed in", "operator", id.Operator, "addr", remoteHost(r))
		http.Redirect(w, r, next, http.StatusSeeOther)
	}
}

// signout ends the session: its nonce is revoked in the store, then the
// cookie cleared. A sign-out the store did not keep is said (503), the
// cookie left, so that the person may try again.
func (c *Console) signout(w http.ResponseWriter, r *http.Request, s session) {
	if err := c.backend.RevokeSession(r.Context(), s.nonce, s.expires); err != nil {
		c.log.Error("console: sign-out: the store did not keep it", "operator", s.operator, "err", err)
		c.render(w, http.StatusServiceUnavailable, "forbidden", view{Title: "Unavailable", Signed: true, CSRF: s.csrf(),
			Error: "not signed out: the control plane's store is unavailable; try again"})
		return
	}
	c.setCookie(w, r, "", time.Time{})
	c.log.Info("console: signed out", "operator", s.operator)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// statusOf is the status to answer a backend's error with.
func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return http.StatusInternalServerError
}
