package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// codexConfig is what the login and model checks read of Codex's
// config.toml: the provider the turns go to, and the providers defined.
type codexConfig struct {
	ModelProvider string `toml:"model_provider"`
	Providers     map[string]struct {
		EnvKey             string `toml:"env_key"`
		RequiresOpenAIAuth bool   `toml:"requires_openai_auth"`
		BaseURL            string `toml:"base_url"`
	} `toml:"model_providers"`
	ChatGPTBaseURL string `toml:"chatgpt_base_url"`
	// OpenAIBaseURL moves Codex's own openai provider.
	OpenAIBaseURL string `toml:"openai_base_url"`
}

// keylessProviders are Codex's built-in providers besides openai: local
// servers, which take no key.
var keylessProviders = map[string]bool{"oss": true, "ollama": true, "lmstudio": true}

// loadConfig reads CODEX_HOME/config.toml (none is no error) and applies
// the executor's -c model_provider=... override, as the app server would.
func (c *Codex) loadConfig(home string) (codexConfig, string, error) {
	return loadConfig(home, c.args())
}

// loadConfig reads home/config.toml (none is no error) and applies a -c
// model_provider=... override of args, as Codex would.
func loadConfig(home string, args []string) (codexConfig, string, error) {
	var cfg codexConfig
	path := filepath.Join(home, "config.toml")
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return cfg, path, err
	default:
		if err := toml.Unmarshal(b, &cfg); err != nil {
			return cfg, path, fmt.Errorf("%s: %v", path, err)
		}
	}
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-c" && args[i] != "--config" {
			continue
		}
		if v, ok := strings.CutPrefix(args[i+1], "model_provider="); ok {
			cfg.ModelProvider = strings.Trim(v, `"'`)
		}
	}
	if cfg.ModelProvider == "" {
		cfg.ModelProvider = "openai"
	}
	return cfg, path, nil
}

// CheckLogin implements cli.LoginChecker. A provider of the user's own
// configuration with an env_key needs that variable in the app server's
// environment; the openai provider needs a login stored under CODEX_HOME,
// which `codex login status` reports without a request. Codex 0.169.0
// does not read OPENAI_API_KEY from the environment for it (measured: the
// requests carry no Authorization), so that variable alone is no login.
func (c *Codex) CheckLogin(ctx context.Context) (cli.Login, error) {
	env := c.env(runner.AttemptSpec{})
	home := codexHome(env)
	if home == "" {
		return cli.Login{Detail: "neither CODEX_HOME nor HOME is set in codex's environment: it has nowhere to find its login",
			Fix: "set HOME (or CODEX_HOME) in agent run's environment, then codex login"}, nil
	}
	login := "codex login"
	if cli.EnvValue(env, "CODEX_HOME") != "" {
		login = "CODEX_HOME=" + home + " codex login"
	}
	cfg, cfgPath, err := c.loadConfig(home)
	if err != nil {
		return cli.Login{Detail: "codex cannot read its configuration: " + err.Error(), Fix: "correct " + cfgPath}, nil
	}
	if p := cfg.ModelProvider; p != "openai" {
		def, ok := cfg.Providers[p]
		switch {
		case !ok && keylessProviders[p]:
			return cli.Login{OK: true, Detail: fmt.Sprintf("provider %s needs no key", p)}, nil
		case !ok:
			return cli.Login{Detail: fmt.Sprintf("model_provider %q is not defined in %s", p, cfgPath),
				Fix: fmt.Sprintf("define [model_providers.%s] in %s, or choose a defined model_provider", p, cfgPath)}, nil
		case def.EnvKey != "":
			return c.checkEnvKey(env, p, def.EnvKey), nil
		case !def.RequiresOpenAIAuth:
			return cli.Login{OK: true, Detail: fmt.Sprintf("provider %s needs no key (no env_key in %s)", p, cfgPath)}, nil
		}
	}
	out, err := cli.Run(ctx, c.cfg.Bin, env, 0, "login", "status")
	said := cli.LastLine(out.Stderr + "\n" + out.Stdout)
	switch {
	case err == nil:
		// It prints part of the key ("API key configured - sk-d***6789"):
		// only the kind of login is taken from it.
		how, all := "", out.Stdout+out.Stderr
		switch {
		case strings.Contains(all, "API key"):
			how = " with an API key"
		case strings.Contains(all, "ChatGPT"):
			how = " with ChatGPT"
		}
		return cli.Login{OK: true, Detail: "logged in" + how + " (codex login status; the key not shown)"}, nil
	case !errors.Is(err, cli.ErrExit):
		return cli.Login{}, err
	case strings.Contains(said, "does not exist"):
		return cli.Login{Detail: "codex login status: " + said, Fix: fmt.Sprintf("mkdir -m 700 %s, then %s", home, login)}, nil
	case !strings.Contains(strings.ToLower(said), "not logged in"):
		return cli.Login{Detail: "codex login status: " + said, Fix: "run codex login status as the agent's user to see why, then " + login}, nil
	}
	detail := fmt.Sprintf("codex is not logged in (codex login status, CODEX_HOME %s)", home)
	fix := login + ", as the user agent run runs as; or, for an API key, printenv OPENAI_API_KEY | " + login + " --with-api-key"
	if cli.EnvValue(env, "OPENAI_API_KEY") != "" {
		detail += "; OPENAI_API_KEY is set, but codex reads its key from the login, not from the environment"
		fix = "printenv OPENAI_API_KEY | " + login + " --with-api-key, as the user agent run runs as"
	}
	return cli.Login{Detail: detail, Fix: fix}, nil
}

// checkEnvKey: a provider's key must reach the app server, and only the
// allowlist (OPENAI_*, --executor-env) does.
func (c *Codex) checkEnvKey(env []string, provider, key string) cli.Login {
	if cli.EnvValue(env, key) != "" {
		return cli.Login{OK: true, Detail: fmt.Sprintf("provider %s: %s is set (not shown)", provider, key)}
	}
	if os.Getenv(key) != "" {
		return cli.Login{Detail: fmt.Sprintf("provider %s: %s is set in the agent's environment, but codex does not get it", provider, key),
			Fix: fmt.Sprintf("pass it on: --executor-env %s (executor-env in the config)", key)}
	}
	fix := fmt.Sprintf("set %s in agent run's environment", key)
	if !strings.HasPrefix(key, "OPENAI_") {
		fix += fmt.Sprintf(" and pass it on with --executor-env %s", key)
	}
	return cli.Login{Detail: fmt.Sprintf("provider %s: its key %s is not set", provider, key), Fix: fix}
}

// modelCatalogCap bounds the bundled catalog read: 0.169.0's is 730 KiB.
const modelCatalogCap = 8 << 20

// KnownModels implements cli.ModelLister: for the openai provider, the
// model catalog bundled with the binary (codex debug models --bundled,
// which makes no request). A provider of the user's own serves whatever
// it serves: then it cannot tell, and says so with ok false.
func (c *Codex) KnownModels(ctx context.Context) (models []string, ok bool, err error) {
	env := c.env(runner.AttemptSpec{})
	cfg, _, err := c.loadConfig(codexHome(env))
	if err != nil || cfg.ModelProvider != "openai" {
		return nil, false, nil // the login check tells a bad configuration
	}
	out, err := cli.Run(ctx, c.cfg.Bin, env, modelCatalogCap, "debug", "models", "--bundled")
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s", err, cli.LastLine(out.Stderr))
	}
	var catalog struct {
		Models []struct {
			Slug string `json:"slug"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(out.Stdout), &catalog); err != nil {
		return nil, false, fmt.Errorf("codex debug models --bundled: %v", err)
	}
	for _, m := range catalog.Models {
		models = append(models, m.Slug)
	}
	return models, len(models) > 0, nil
}
