// Package egress decides where an attempt may connect, and carries its
// connections there.
//
// A confined attempt runs in a network namespace of its own, which has
// nothing but loopback (internal/keeper makes it). Its keeper, outside
// that namespace, listens inside it on loopback and dials out from the
// host for it: an HTTP proxy (CONNECT, and plain HTTP in absolute form)
// that the attempt is given as HTTPS_PROXY and HTTP_PROXY, and a plain
// forward of each allowed loopback endpoint (a mock or local model
// server) from the same address inside. Everything else the attempt
// tries is refused: by the proxy, which counts and names what it refused,
// or by the namespace itself, where nothing else listens and nothing
// routes out.
package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Rule is one entry of an allow list: a host, and the port it may be
// reached on.
type Rule struct {
	// Host is a DNS name in lower case, "*.NAME" for every name under
	// NAME, or an IP address (no brackets).
	Host string
	// Port is the one port allowed; 0 allows 443 and 80, the ports of an
	// https:// or http:// URL without one.
	Port int
}

// ParseRule parses HOST, HOST:PORT, *.DOMAIN[:PORT], an IPv4 address, or an
// IPv6 address in brackets ([::1]:8080) or bare.
func ParseRule(s string) (Rule, error) {
	in := s
	if in == "" {
		return Rule{}, errors.New("egress rule: empty (want HOST or HOST:PORT)")
	}
	if strings.ContainsAny(in, "/@?# \t") {
		return Rule{}, fmt.Errorf("egress rule %q: want HOST or HOST:PORT, not a URL", s)
	}
	host, port := in, 0
	if addr, err := netip.ParseAddr(in); err == nil { // a bare IP, IPv6 included
		return Rule{Host: addr.Unmap().String()}, nil
	}
	if h, p, err := net.SplitHostPort(in); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, fmt.Errorf("egress rule %q: port %q is not 1-65535", s, p)
		}
		host, port = h, n
	} else if strings.HasPrefix(in, "[") {
		host = strings.TrimSuffix(strings.TrimPrefix(in, "["), "]")
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return Rule{Host: addr.Unmap().String(), Port: port}, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := strings.TrimPrefix(host, "*.")
	if !validName(name) {
		return Rule{}, fmt.Errorf("egress rule %q: %q is not a host name or IP address", s, host)
	}
	return Rule{Host: host, Port: port}, nil
}

// validName reports whether s is a DNS name: labels of letters, digits,
// hyphens and underscores, none empty.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// String is the rule as ParseRule takes it.
func (r Rule) String() string {
	if r.Port == 0 {
		if strings.Contains(r.Host, ":") {
			return "[" + r.Host + "]"
		}
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// MarshalText writes the rule as ParseRule takes it.
func (r Rule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses a rule.
func (r *Rule) UnmarshalText(b []byte) error {
	v, err := ParseRule(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Loopback reports whether the rule names this machine's loopback: an
// address in 127.0.0.0/8, ::1, or localhost.
func (r Rule) Loopback() bool { return isLoopbackHost(r.Host) }

func isLoopbackHost(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	addr, err := netip.ParseAddr(h)
	return err == nil && addr.Unmap().IsLoopback()
}

// allowsPort reports whether the rule's port allows port.
func (r Rule) allowsPort(port int) bool {
	if r.Port == 0 {
		return port == 443 || port == 80
	}
	return r.Port == port
}

// Allows reports whether the rule lets a connection to host:port through.
// host is a name or an IP address as a client names it; a name is never
// resolved to match an IP rule, nor an IP to match a name. Loopback is
// one place whatever it is called: a rule for localhost:8080 allows
// 127.0.0.1:8080.
func (r Rule) Allows(host string, port int) bool {
	if !r.allowsPort(port) {
		return false
	}
	host = canonicalHost(host)
	if r.Loopback() {
		return isLoopbackHost(host)
	}
	if name, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(host, "."+name)
	}
	return host == r.Host
}

// canonicalHost is host in lower case, without brackets or a trailing dot,
// an IP address in its usual form.
func canonicalHost(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr.Unmap().String()
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// Policy is where one attempt may connect.
type Policy struct {
	// Allow are the hosts it may reach, through its proxy; each loopback
	// one with a port is also forwarded as it is, for a CLI that connects
	// to it directly.
	Allow []Rule `json:"allow"`
}

// ParseRules parses an allow list, naming the entry that is wrong.
func ParseRules(list []string) ([]Rule, error) {
	out := make([]Rule, 0, len(list))
	for _, s := range list {
		r, err := ParseRule(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = appendRule(out, r)
	}
	return out, nil
}

// appendRule appends r unless list has it.
func appendRule(list []Rule, r Rule) []Rule {
	for _, have := range list {
		if have == r {
			return list
		}
	}
	return append(list, r)
}

// With is a copy of p that also allows rules.
func (p Policy) With(rules ...Rule) Policy {
	out := Policy{Allow: append([]Rule(nil), p.Allow...)}
	for _, r := range rules {
		out.Allow = appendRule(out.Allow, r)
	}
	return out
}

// Allows reports whether a connection to host:port is allowed.
func (p Policy) Allows(host string, port int) bool {
	for _, r := range p.Allow {
		if r.Allows(host, port) {
			return true
		}
	}
	return false
}

// Forwards are the loopback endpoints the attempt reaches as they are,
// each from the same port of its own loopback: the loopback rules that
// name a port, the first for each port.
func (p Policy) Forwards() []Rule {
	var out []Rule
	seen := map[int]bool{}
	for _, r := range p.Allow {
		if r.Loopback() && r.Port != 0 && !seen[r.Port] {
			seen[r.Port] = true
			out = append(out, r)
		}
	}
	return out
}

// Narrow is the part of p that task, a task's own list, keeps: the
// rules of p that allow a host task names, as task names it (a task
// cannot widen what p allows). Nil task keeps all of p.
func (p Policy) Narrow(task []Rule) Policy {
	if task == nil {
		return p
	}
	var out Policy
	for _, t := range task {
		for _, r := range p.Allow {
			if covers(r, t) {
				out.Allow = appendRule(out.Allow, t)
				break
			}
		}
	}
	return out
}

// covers reports whether every connection t allows, r allows too.
func covers(r, t Rule) bool {
	ports := []int{t.Port}
	if t.Port == 0 {
		ports = []int{443, 80}
	}
	host := t.Host
	if name, ok := strings.CutPrefix(t.Host, "*."); ok {
		// A wildcard is covered by the same wildcard, or one above it.
		rn, ok := strings.CutPrefix(r.Host, "*.")
		if !ok || !(name == rn || strings.HasSuffix(name, "."+rn)) {
			return false
		}
		host = ""
	}
	for _, port := range ports {
		if host != "" && !r.Allows(host, port) || host == "" && !r.allowsPort(port) {
			return false
		}
	}
	return true
}

// Endpoint is the rule a model API's base URL needs: its host and port
// (the scheme's when it names none). An empty or unusable URL gives false.
func Endpoint(rawURL string) (Rule, bool) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Hostname() == "" {
		return Rule{}, false
	}
	port := 443
	if u.Scheme == "http" || u.Scheme == "ws" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, false
		}
		port = n
	}
	hostPort := net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	r, err := ParseRule(hostPort)
	return r, err == nil
}

// Strings are the rules as ParseRule takes them.
func (p Policy) Strings() []string {
	out := make([]string, len(p.Allow))
	for i, r := range p.Allow {
		out[i] = r.String()
	}
	return out
}

// String lists the rules, for logs.
func (p Policy) String() string {
	b, _ := json.Marshal(p.Strings())
	return string(b)
}
