package state

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Requirement is one thing a task asks of the agent that runs it, written
// KEY=VALUE: executor=codex, model=gpt-5, repo=app, os=linux,
// arch=arm64, label=gpu=yes, or label=gpu (the label set, to any value).
// The control plane grants the task only to an agent that advertises
// every requirement; see docs/routing.md.
type Requirement string

// RequireKey is what a requirement is about: the part before its first =.
type RequireKey string

// The requirement keys.
const (
	RequireExecutor RequireKey = "executor" // the agent's executor kind (exec, codex, claude, sample)
	RequireModel    RequireKey = "model"    // a model in the agent's model list
	RequireRepo     RequireKey = "repo"     // a repository the agent serves
	RequireOS       RequireKey = "os"       // the agent's operating system, as Go names it (linux, darwin)
	RequireArch     RequireKey = "arch"     // the agent's architecture, as Go names it (amd64, arm64)
	RequireLabel    RequireKey = "label"    // a label: KEY=VALUE, or KEY alone for any value
)

// RequireKeys lists every requirement key.
var RequireKeys = []RequireKey{RequireExecutor, RequireModel, RequireRepo, RequireOS, RequireArch, RequireLabel}

// Caps on a task's requirements.
const (
	MaxRequirements     = 16
	MaxRequirementBytes = 200
)

// requireKeyNames is RequireKeys as a person reads them.
func requireKeyNames() string {
	names := make([]string, len(RequireKeys))
	for i, k := range RequireKeys {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// Key is what r is about.
func (r Requirement) Key() RequireKey {
	k, _, _ := strings.Cut(string(r), "=")
	return RequireKey(k)
}

// Value is what r asks its key to be: for a label, KEY=VALUE or KEY.
func (r Requirement) Value() string {
	_, v, _ := strings.Cut(string(r), "=")
	return v
}

// Label is the label r asks for, and its value; anyValue is true when r
// asks only that the label be set. It is meaningful only for key label.
func (r Requirement) Label() (key, value string, anyValue bool) {
	key, value, set := strings.Cut(r.Value(), "=")
	return key, value, !set
}

// Check refuses a requirement that is not KEY=VALUE with a known key and
// a value that is a word (CheckWord; a label's is NAME or NAME=VALUE,
// NAME of letters, digits, '.', '_' or '-'), or that is over
// MaxRequirementBytes. The one-line error names the keys.
func (r Requirement) Check() error {
	s := string(r)
	switch {
	case len(s) > MaxRequirementBytes:
		return fmt.Errorf("requirement is over %d bytes", MaxRequirementBytes)
	case !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("requirement %q is not UTF-8 or holds a control character", s)
	}
	k, v, ok := strings.Cut(s, "=")
	switch {
	case !ok || !slices.Contains(RequireKeys, RequireKey(k)):
		return fmt.Errorf("requirement %q: want KEY=VALUE with KEY one of %s (label=NAME or label=NAME=VALUE)", s, requireKeyNames())
	case v == "":
		return fmt.Errorf("requirement %q: the value is empty (want %s=VALUE)", s, k)
	}
	if RequireKey(k) == RequireLabel {
		name, value, set := strings.Cut(v, "=")
		if !labelName(name) || set && CheckWord(value) != nil {
			return fmt.Errorf("requirement %q: want label=NAME or label=NAME=VALUE, NAME of letters, digits, '.', '_' or '-', VALUE without spaces", s)
		}
		return nil
	}
	if err := CheckWord(v); err != nil {
		return fmt.Errorf("requirement %q: the value %v", s, err)
	}
	return nil
}

// CheckWord refuses a requirement's value, or a capability an agent
// advertises, that is empty, not UTF-8, or holds a space, a control
// character, a comma or '='. Its error is a phrase to follow the word's
// name: "is empty".
func CheckWord(w string) error {
	switch {
	case w == "":
		return fmt.Errorf("is empty")
	case !utf8.ValidString(w):
		return fmt.Errorf("is not UTF-8")
	case strings.IndexFunc(w, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == ',' || r == '=' }) >= 0:
		return fmt.Errorf("%q holds a space, a control character, ',' or '='", w)
	}
	return nil
}

// labelName reports whether s is a label's name: letters, digits, '.',
// '_' or '-', starting with a letter or digit (as agents' labels are).
func labelName(s string) bool {
	for i, c := range s {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return s != ""
}

// CheckRequirements refuses a task's requirements when one is malformed
// (Requirement.Check) or there are more than MaxRequirements.
func CheckRequirements(rs []Requirement) error {
	if len(rs) > MaxRequirements {
		return fmt.Errorf("%d requirements; at most %d", len(rs), MaxRequirements)
	}
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return err
		}
	}
	return nil
}

// RequirementsText is rs as a person reads them: "executor=codex, label=gpu".
func RequirementsText(rs []Requirement) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// slot is what r constrains that another requirement may constrain too:
// its key, and for a label the label's name. Two requirements of one
// slot ask the same thing of the agent (one executor, one OS, one label
// of a name; a model, the one every attempt runs with).
func (r Requirement) slot() string {
	if r.Key() == RequireLabel {
		name, _, _ := r.Label()
		return "label=" + name
	}
	return string(r.Key())
}

// narrows reports whether r asks at least what p asks, of the same slot:
// the same requirement, or label=NAME=VALUE under label=NAME.
func (r Requirement) narrows(p Requirement) bool {
	if r == p {
		return true
	}
	_, _, pAny := p.Label()
	return p.Key() == RequireLabel && pAny && r.slot() == p.slot()
}

// Narrow is what a subtask is routed by: every requirement of its
// parent's, narrowed by the subtask's own. A subtask's requirement may
// add a slot the parent left open, or restrict one (label=gpu=a100 under
// label=gpu); one that would replace the parent's (label=tier=trusted
// under label=tier=sandbox, executor=claude under executor=codex) is
// refused, naming both, so that no task routes its work wider than a
// person routed it. The parent's requirements keep their order, each
// restricted in place; the subtask's new ones follow.
func Narrow(parent, child []Requirement) ([]Requirement, error) {
	out := slices.Clone(parent)
	for _, c := range child {
		merged := false
		for i, p := range out {
			if p.slot() != c.slot() {
				continue
			}
			switch {
			case c.narrows(p):
				out[i], merged = c, true
			case p.narrows(c):
				merged = true // asks less than what is kept already
			default:
				return nil, fmt.Errorf("the subtask may only narrow its parent's routing: %s would replace the parent's %s", c, p)
			}
			break
		}
		if !merged && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}
