// Package submission reads what is submitted as a task (agent submit's
// flags, agent subtask submit's) into the control plane's request, and
// refuses before anything is sent what the control plane would refuse: a
// malformed repository, base, requirement, label or egress host, a budget
// below zero, a prompt file that cannot be read. Each mistake is one line
// naming its flag; every error it returns is a mistake in the command
// line.
package submission

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Form is what agent submit's flags say of a task.
type Form struct {
	Title, Prefer string
	// Prompt is --prompt as given: @FILE reads it from a file (Prompt).
	Prompt      string
	Repo, Base  string
	NoCommit    bool
	MaxAttempts int
	Requires    []string // --require KEY=VALUE
	Labels      []string // --label KEY=VALUE
	MaxTokens   int64
	MaxTime     time.Duration
	EgressAllow []string
	// OnSideEffect is continue, ask or "" (the agent's setting).
	OnSideEffect string

	// Wait is --wait; Timeout its --timeout; Changed reports whether a
	// flag was given on the command line (--wait-queued and --timeout
	// need --wait).
	Wait    bool
	Timeout time.Duration
	Changed func(flag string) bool
}

// Request checks f and makes the request that submits it.
func (f Form) Request() (api.CreateTaskRequest, error) {
	var req api.CreateTaskRequest
	prompt, err := Prompt(f.Prompt)
	if err != nil {
		return req, err
	}
	if strings.TrimSpace(prompt) == "" {
		return req, errors.New("--prompt is required")
	}
	if err := checkRepo(f.Repo, f.Base); err != nil {
		return req, err
	}
	if f.NoCommit && f.Repo == "" {
		return req, errors.New("--no-commit needs --repo: only a task on a repository has commits to leave out")
	}
	reqs, err := Requirements(f.Requires)
	if err != nil {
		return req, err
	}
	switch {
	case f.MaxTokens < 0:
		return req, fmt.Errorf("--max-tokens %d: want 0 (the agent's default) or more", f.MaxTokens)
	case f.MaxTime < 0:
		return req, fmt.Errorf("--max-time %s: want 0 (the agent's default) or more", f.MaxTime)
	}
	for _, name := range []string{"wait-queued", "timeout"} {
		if f.Changed != nil && f.Changed(name) && !f.Wait {
			return req, fmt.Errorf("--%s needs --wait", name)
		}
	}
	if f.Timeout < 0 {
		return req, fmt.Errorf("--timeout %s: want 0 (no bound) or more", f.Timeout)
	}
	labels, err := Labels(f.Labels)
	if err != nil {
		return req, err
	}
	if err := api.CheckEgressAllow(f.EgressAllow); err != nil {
		return req, fmt.Errorf("--egress-allow: %v", err)
	}
	if err := state.OnSideEffect(f.OnSideEffect).Check(); err != nil {
		return req, fmt.Errorf("--on-side-effect %q: want continue or ask", f.OnSideEffect)
	}
	return api.CreateTaskRequest{Title: f.Title, Prompt: prompt, Prefer: api.Prefer(f.Prefer), MaxAttempts: f.MaxAttempts,
		Repo: f.Repo, Base: f.Base, NoCommit: f.NoCommit, Requires: reqs, Labels: labels, MaxTokens: f.MaxTokens, MaxTime: state.Duration(f.MaxTime),
		EgressAllow: f.EgressAllow, OnSideEffect: state.OnSideEffect(f.OnSideEffect)}, nil
}

// Subtask checks what agent subtask submit was given (its --title, the
// words of its prompt, its --label and --require flags) and makes the
// request that submits the subtask.
func Subtask(title string, words, labels, requires []string) (api.CreateTaskRequest, error) {
	prompt := strings.Join(words, " ")
	if strings.TrimSpace(prompt) == "" {
		return api.CreateTaskRequest{}, errors.New("the prompt is empty")
	}
	l, err := Labels(labels)
	if err != nil {
		return api.CreateTaskRequest{}, err
	}
	reqs, err := Requirements(requires)
	if err != nil {
		return api.CreateTaskRequest{}, err
	}
	return api.CreateTaskRequest{Title: title, Prompt: prompt, Labels: l, Requires: reqs}, nil
}

// checkRepo refuses a --repo or --base the control plane would refuse: a
// malformed name or ref, or a base without a repository.
func checkRepo(repo, base string) error {
	switch {
	case repo == "" && base != "":
		return errors.New("--base needs --repo: a base is a ref of the task's repository")
	case repo == "":
		return nil
	}
	if err := api.CheckRepoName(repo); err != nil {
		return fmt.Errorf("--repo: %s", taskview.Visible(err.Error()))
	}
	if err := api.CheckBase(base); err != nil {
		return fmt.Errorf("--base: %s", taskview.Visible(err.Error()))
	}
	return nil
}

// Prompt reads --prompt @FILE from the file; a missing file is an error,
// not a prompt. A prompt of one word starting with @ is a file name
// (@@WORD is the word @WORD itself); a prompt with spaces or lines is
// text, so the sample executor's directives ("@fail rate_limit") pass as
// they are.
func Prompt(p string) (string, error) {
	if literal, ok := strings.CutPrefix(p, "@@"); ok {
		return "@" + literal, nil
	}
	file, ok := strings.CutPrefix(p, "@")
	if !ok || file == "" || strings.ContainsAny(file, " \t\r\n") {
		return p, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--prompt @%s: %v (to send a prompt that is one word starting with @, write @@)", file, errors.Unwrap(err))
	}
	return string(b), nil
}

// Requirements are the --require flags as requirements, refused when one
// is malformed or its key unknown.
func Requirements(flags []string) ([]state.Requirement, error) {
	reqs := make([]state.Requirement, len(flags))
	for i, f := range flags {
		reqs[i] = state.Requirement(f)
	}
	if err := state.CheckRequirements(reqs); err != nil {
		return nil, fmt.Errorf("--require: %s", taskview.Visible(err.Error()))
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	return reqs, nil
}

// Labels reads --label KEY=VALUE values: nil for none.
func Labels(values []string) (map[string]string, error) {
	for _, v := range values {
		if !strings.Contains(v, "=") {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE", v)
		}
	}
	labels, err := api.ParseLabels(values)
	if err != nil {
		return nil, fmt.Errorf("--label: %v", err)
	}
	return labels, nil
}
