package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/edgeagent/agent/internal/shellword"
)

// hint makes the commands the tools suggest to a person ("run it again
// with: …") work as printed: the binary as the person invoked it, and the
// control plane flags with the values the suggesting command knows. A
// value it does not know is a placeholder (URL, FILE) that the hint's
// own words explain; a token never appears, only the file that holds it.
type hint struct {
	cmd string // the binary, as invoked
	cp  string // " --control-plane … --token-file …", or ""
	// unknown names the placeholders in cp, for the line that explains
	// them; empty when every value is known.
	unknown []string
}

// newHint is the hint for commands that reach the control plane with f's
// settings (nil: none known).
func newHint(f *cpFlags) hint {
	h := hint{cmd: invokedAs()}
	var url, tokenFile string
	var insecure bool
	if f != nil {
		url, tokenFile, insecure = f.url, f.tokenFile, f.insecure
	}
	if url == "" {
		url = "URL"
		h.unknown = append(h.unknown, "URL the control plane's address")
	}
	h.cp = " --control-plane " + shellword.Quote(url)
	switch {
	case tokenFile != "":
		h.cp += " --token-file " + shellword.Quote(tokenFile)
	case strings.TrimSpace(os.Getenv("AGENT_TOKEN")) != "":
		// The environment that ran this command gives the token.
	default:
		h.cp += " --token-file FILE"
		h.unknown = append(h.unknown, "FILE a file holding a person's token (the control plane's operator-token)")
	}
	if insecure {
		h.cp += " --insecure"
	}
	return h
}

// Tasks is `agent tasks VERB ID ARGS` with the control plane flags.
func (h hint) Tasks(verb, id, args string) string {
	s := h.cmd + " tasks " + verb + " " + shellword.Quote(id)
	if args != "" {
		s += " " + args
	}
	return s + h.cp
}

// Placeholders explains the placeholders of the hint's commands, "" when
// there are none.
func (h hint) Placeholders() string {
	if len(h.unknown) == 0 {
		return ""
	}
	return "(with " + strings.Join(h.unknown, "; ") + ")"
}

// invokedAs is how the person invoked this binary, for the commands a
// hint suggests: os.Args[0] as typed when it holds a path (bin/agent,
// ./agent, /usr/local/bin/agent: valid from where they typed it), its
// name when the shell found it on PATH, and "go run ./cmd/agent" for a
// binary go run built (it is gone when go run ends).
func invokedAs() string {
	arg0 := os.Args[0]
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") && strings.Contains(filepath.ToSlash(arg0), "/exe/") {
		return "go run ./cmd/agent"
	}
	return shellword.Quote(arg0)
}
