package submission

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// TestMain checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Moved from cmd/agent's TestPromptArg: the reading of --prompt.
func TestPrompt(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "prompt.md")
	if err := os.WriteFile(file, []byte("Fix the flaky test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{"text", "Fix it", "Fix it", ""},
		{"a file", "@" + file, "Fix the flaky test\n", ""},
		{"a missing file", "@" + file + ".nope", "", "--prompt @" + file + ".nope: no such file or directory (to send a prompt that is one word starting with @, write @@)"},
		{"a word starting with @", "@@hang", "@hang", ""},
		{"sample directives are text", "Summarize\n@fail rate_limit", "Summarize\n@fail rate_limit", ""},
		{"a directive with arguments is text", "@output hi", "@output hi", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Prompt(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Prompt(%q) = %q, %v; want the error %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Prompt(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// A form makes the request the control plane is sent, field for field.
func TestRequestCarriesEveryField(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "prompt.md")
	if err := os.WriteFile(file, []byte("Bump the deps\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := Form{Title: "deps", Prompt: "@" + file, Prefer: "gui", MaxAttempts: 2, Repo: "site", Base: "release/2.1", NoCommit: true,
		Requires: []string{"executor=codex", "label=gpu"}, Labels: []string{"type=explorer"}, MaxTokens: 1000, MaxTime: 20 * time.Minute,
		EgressAllow: []string{"pypi.org"}, OnSideEffect: "ask", Wait: true, Timeout: time.Minute, Changed: func(string) bool { return true }}
	got, err := f.Request()
	if err != nil {
		t.Fatal(err)
	}
	want := api.CreateTaskRequest{Title: "deps", Prompt: "Bump the deps\n", Prefer: api.Prefer("gui"), MaxAttempts: 2, Repo: "site", Base: "release/2.1",
		NoCommit: true, Requires: []state.Requirement{"executor=codex", "label=gpu"}, Labels: map[string]string{"type": "explorer"}, MaxTokens: 1000,
		MaxTime: state.Duration(20 * time.Minute), EgressAllow: []string{"pypi.org"}, OnSideEffect: state.OnSideEffect("ask")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the request is\n%+v\nwant\n%+v", got, want)
	}
	// No requirement, no label: none sent, rather than empty lists.
	got, err = Form{Prompt: "hi"}.Request()
	if err != nil || got.Requires != nil || got.Labels != nil || got.Prompt != "hi" {
		t.Fatalf("a bare form made %+v, %v", got, err)
	}
}

// Each mistake is refused with one line naming its flag, before anything
// is sent.
func TestRequestRefusesEachMistake(t *testing.T) {
	t.Parallel()
	waitFlag := func(name string) func(string) bool { return func(f string) bool { return f == name } }
	for _, tc := range []struct {
		name string
		form Form
		want string
	}{
		{"no prompt", Form{Prompt: "  \n"}, "--prompt is required"},
		{"a base without a repository", Form{Prompt: "p", Base: "main"}, "--base needs --repo"},
		{"a malformed repository", Form{Prompt: "p", Repo: "../up"}, "--repo: "},
		{"a malformed base", Form{Prompt: "p", Repo: "site", Base: "-x"}, "--base: "},
		{"no-commit without a repository", Form{Prompt: "p", NoCommit: true}, "--no-commit needs --repo"},
		{"an unknown requirement", Form{Prompt: "p", Requires: []string{"colour=blue"}}, "--require: "},
		{"tokens below zero", Form{Prompt: "p", MaxTokens: -1}, "--max-tokens -1: want 0 (the agent's default) or more"},
		{"time below zero", Form{Prompt: "p", MaxTime: -time.Second}, "--max-time -1s: want 0 (the agent's default) or more"},
		{"wait-queued without wait", Form{Prompt: "p", Changed: waitFlag("wait-queued")}, "--wait-queued needs --wait"},
		{"timeout without wait", Form{Prompt: "p", Changed: waitFlag("timeout")}, "--timeout needs --wait"},
		{"a timeout below zero", Form{Prompt: "p", Wait: true, Timeout: -time.Second}, "--timeout -1s: want 0 (no bound) or more"},
		{"a label without a value", Form{Prompt: "p", Labels: []string{"gpu"}}, `--label "gpu": want KEY=VALUE`},
		{"a bad egress host", Form{Prompt: "p", EgressAllow: []string{"http://x/"}}, "--egress-allow: "},
		{"an unknown side-effect rule", Form{Prompt: "p", OnSideEffect: "maybe"}, `--on-side-effect "maybe": want continue or ask`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.form.Request()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Request() = %v, want one line starting %q", err, tc.want)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	t.Parallel()
	if got, err := Labels(nil); got != nil || err != nil {
		t.Errorf("no labels = %v, %v; want nil", got, err)
	}
	got, err := Labels([]string{"type=explorer", "gpu=a100", "type=general"})
	if err != nil || !reflect.DeepEqual(got, map[string]string{"type": "general", "gpu": "a100"}) {
		t.Errorf("labels = %v, %v; the last of a key wins", got, err)
	}
	if _, err := Labels([]string{"=x"}); err == nil || !strings.HasPrefix(err.Error(), "--label: ") {
		t.Errorf("an empty key = %v, want --label: …", err)
	}
}

// subtask submit's prompt is its words; an empty one, a bad label or
// requirement is refused.
func TestSubtask(t *testing.T) {
	t.Parallel()
	got, err := Subtask("Tests", []string{"Fix", "the", "test"}, []string{"kind=coder"}, []string{"executor=claude"})
	want := api.CreateTaskRequest{Title: "Tests", Prompt: "Fix the test", Labels: map[string]string{"kind": "coder"}, Requires: []state.Requirement{"executor=claude"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Subtask = %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range []struct {
		words, labels, requires []string
		want                    string
	}{
		{[]string{" ", ""}, nil, nil, "the prompt is empty"},
		{[]string{"p"}, []string{"kind"}, nil, `--label "kind": want KEY=VALUE`},
		{[]string{"p"}, nil, []string{"colour=blue"}, "--require: "},
	} {
		if _, err := Subtask("", tc.words, tc.labels, tc.requires); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Subtask(%q, %q, %q) = %v, want %q…", tc.words, tc.labels, tc.requires, err, tc.want)
		}
	}
}
