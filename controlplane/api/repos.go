package api

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Caps on how a task names its repository and base, and on how many
// repositories an agent announces: the names are kept in memory for every
// agent and task, and a base goes to git on the agent's machine.
const (
	MaxRepoNameBytes = 64
	MaxBaseBytes     = 256
	MaxReposPerAgent = 64
)

// CheckRepoName refuses a repository name that is not a simple name: one
// to MaxRepoNameBytes ASCII letters, digits, '.', '_' or '-', starting
// with a letter or a digit.
func CheckRepoName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a repository name is required")
	case len(name) > MaxRepoNameBytes:
		return fmt.Errorf("repository name is over %d bytes", MaxRepoNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("repository name %q: want letters, digits, '.', '_' or '-', starting with a letter or digit", name)
		}
	}
	return nil
}

// CheckBase refuses a base ref that is over MaxBaseBytes, is not UTF-8,
// holds a control character or a space, or starts with '-' (git would
// read it as an option). Whether the ref exists only the agent's
// repository can say.
func CheckBase(ref string) error {
	switch {
	case len(ref) > MaxBaseBytes:
		return fmt.Errorf("base is over %d bytes", MaxBaseBytes)
	case !utf8.ValidString(ref):
		return fmt.Errorf("base is not UTF-8")
	case len(ref) > 0 && ref[0] == '-':
		return fmt.Errorf("base %q starts with '-'", ref)
	}
	for _, r := range ref {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("base %q holds a control character or a space", ref)
		}
	}
	return nil
}

// Caps on an agent's labels: a few short words a person filters agents
// by (team=infra, gpu=yes).
const (
	MaxLabels          = 32
	MaxLabelValueBytes = 128
)

// CheckLabels refuses labels that are too many, whose key is not a simple
// name (as CheckRepoName says) or whose value is over MaxLabelValueBytes,
// not UTF-8, or holds a control character.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels; at most %d", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if err := CheckRepoName(k); err != nil {
			return fmt.Errorf("label key %q: want letters, digits, '.', '_' or '-', starting with a letter or digit, at most %d bytes", k, MaxRepoNameBytes)
		}
		if len(v) > MaxLabelValueBytes || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return fmt.Errorf("label %s: the value is over %d bytes, not UTF-8, or holds a control character", k, MaxLabelValueBytes)
		}
	}
	return nil
}

// CheckRepos refuses an agent's list of repositories that is longer than
// MaxReposPerAgent or holds a name CheckRepoName refuses.
func CheckRepos(repos []string) error {
	if len(repos) > MaxReposPerAgent {
		return fmt.Errorf("%d repositories; at most %d", len(repos), MaxReposPerAgent)
	}
	for _, r := range repos {
		if err := CheckRepoName(r); err != nil {
			return err
		}
	}
	return nil
}
