package codex

import (
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/runner/cli"
)

// defaultEndpoints are where Codex reaches its model with its own
// provider: the API (a key), a ChatGPT login's backend, and that login's
// token refresh.
var defaultEndpoints = []string{"api.openai.com", "chatgpt.com", "auth.openai.com"}

// localProviders are where Codex's built-in local providers listen
// unless a base_url says otherwise.
var localProviders = map[string]string{"ollama": "http://localhost:11434/v1", "oss": "http://localhost:11434/v1", "lmstudio": "http://localhost:1234/v1"}

// endpoints are the hosts an attempt's Codex must reach, for its confined
// network (runner.AttemptSpec.EgressPolicy).
func (c *Codex) endpoints(env []string) []egress.Rule { return Endpoints(env, c.args()) }

// Endpoints are the hosts Codex reaches, in env, with args its command
// line (-c overrides): its own, OPENAI_BASE_URL, openai_base_url (which
// moves its openai provider), and the base URL of every
// provider its config.toml and the overrides define (the one it uses
// among them). codex-acp, which embeds Codex, reaches the same.
func Endpoints(env, args []string) []egress.Rule {
	urls := append([]string{}, cli.EnvValue(env, "OPENAI_BASE_URL"))
	home := Home(env)
	if cfg, _, err := loadConfig(home, args); err == nil {
		for _, p := range cfg.Providers {
			urls = append(urls, p.BaseURL)
		}
		urls = append(urls, cfg.ChatGPTBaseURL, cfg.OpenAIBaseURL, localProviders[cfg.ModelProvider])
	}
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-c" && args[i] != "--config" {
			continue
		}
		key, val, ok := strings.Cut(args[i+1], "=")
		if ok && strings.HasSuffix(strings.TrimSpace(key), "base_url") {
			urls = append(urls, tomlString(val))
		}
	}
	var out []egress.Rule
	for _, h := range defaultEndpoints {
		if r, err := egress.ParseRule(h); err == nil {
			out = append(out, r)
		}
	}
	for _, u := range urls {
		if r, ok := egress.Endpoint(u); ok {
			out = append(out, r)
		}
	}
	return out
}

// tomlString is a -c value as Codex reads it, a TOML value, when it is a
// string; else the text itself.
func tomlString(v string) string {
	var doc struct {
		V string `toml:"v"`
	}
	if err := toml.Unmarshal([]byte("v = "+v), &doc); err == nil {
		return doc.V
	}
	return strings.Trim(strings.TrimSpace(v), `"'`)
}
