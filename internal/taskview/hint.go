package taskview

import (
	"path/filepath"
	"strings"

	"github.com/edgeagent/agent/internal/shellword"
)

// CommandHint is the Hint of the command line: the binary as the person
// invoked it, and the control plane flags with the values the suggesting
// command knows. A value it does not know is a placeholder (URL, FILE)
// that Placeholders explains; a token never appears, only the file that
// holds it.
type CommandHint struct {
	cmd string // the binary, as invoked
	cp  string // " --control-plane … --token-file …"
	// unknown names the placeholders in cp, for the line that explains
	// them; empty when every value is known.
	unknown []string
}

// NewCommandHint is the hint of commands run as cmd (InvokedAs) that
// reach the control plane at url ("": unknown) with the token in
// tokenFile, else in the environment when tokenInEnv (the environment
// that ran the suggesting command gives it), else unknown.
func NewCommandHint(cmd, url, tokenFile string, tokenInEnv, insecure bool) CommandHint {
	h := CommandHint{cmd: cmd}
	if url == "" {
		url = "URL"
		h.unknown = append(h.unknown, "URL the control plane's address")
	}
	h.cp = " --control-plane " + shellword.Quote(url)
	switch {
	case tokenFile != "":
		h.cp += " --token-file " + shellword.Quote(tokenFile)
	case tokenInEnv:
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
func (h CommandHint) Tasks(verb, id, args string) string {
	s := h.cmd + " tasks " + verb + " " + shellword.Quote(id)
	if args != "" {
		s += " " + args
	}
	return s + h.cp
}

// Placeholders explains the placeholders of the hint's commands, "" when
// there are none.
func (h CommandHint) Placeholders() string {
	if len(h.unknown) == 0 {
		return ""
	}
	return "(with " + strings.Join(h.unknown, "; ") + ")"
}

// InvokedAs is how the person invoked a binary whose os.Args[0] is arg0,
// for the commands a hint suggests: arg0 as typed when it holds a path
// (bin/agent, ./agent, /usr/local/bin/agent: valid from where they typed
// it), its name when the shell found it on PATH, and "go run ./cmd/agent"
// for a binary go run built (it is gone when go run ends).
func InvokedAs(arg0 string) string {
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") && strings.Contains(filepath.ToSlash(arg0), "/exe/") {
		return "go run ./cmd/agent"
	}
	return shellword.Quote(arg0)
}
