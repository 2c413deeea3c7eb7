package taskview

import "testing"

func TestCommandHint(t *testing.T) {
	for _, c := range []struct {
		name, url, tokenFile string
		tokenInEnv, insecure bool
		tasks, placeholders  string
	}{
		{"all known", "http://10.0.0.5:8080", "/home/me/op token", false, true,
			`bin/agent tasks retry 'a b' --force --control-plane http://10.0.0.5:8080 --token-file '/home/me/op token' --insecure`, ""},
		{"token in the environment", "https://cp", "", true, false, `bin/agent tasks retry 'a b' --force --control-plane https://cp`, ""},
		{"none known", "", "", false, false, `bin/agent tasks retry 'a b' --force --control-plane URL --token-file FILE`,
			"(with URL the control plane's address; FILE a file holding a person's token (the control plane's operator-token))"},
	} {
		h := NewCommandHint("bin/agent", c.url, c.tokenFile, c.tokenInEnv, c.insecure)
		if got := h.Tasks("retry", "a b", "--force"); got != c.tasks {
			t.Errorf("%s: Tasks = %s\nwant %s", c.name, got, c.tasks)
		}
		if got := h.Placeholders(); got != c.placeholders {
			t.Errorf("%s: Placeholders = %q, want %q", c.name, got, c.placeholders)
		}
	}
	if got := NewCommandHint("agent", "https://cp", "f", false, false).Tasks("show", "t-1", ""); got != "agent tasks show t-1 --control-plane https://cp --token-file f" {
		t.Errorf("no args: %s", got)
	}
}

func TestInvokedAs(t *testing.T) {
	for arg0, want := range map[string]string{
		"agent":                               "agent",
		"./bin/agent":                         "./bin/agent",
		"/opt/my tools/agent":                 "'/opt/my tools/agent'",
		"/tmp/go-build123/b001/exe/agent":     "go run ./cmd/agent",
		"/root/.cache/go-build/ab/agent.test": "/root/.cache/go-build/ab/agent.test",
	} {
		if got := InvokedAs(arg0); got != want {
			t.Errorf("InvokedAs(%q) = %s, want %s", arg0, got, want)
		}
	}
}
