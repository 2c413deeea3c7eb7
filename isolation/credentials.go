package isolation

import (
	"os"
	"os/user"
	"path/filepath"
)

// Credential is a place in a home directory where people keep a
// credential, and what it holds.
type Credential struct {
	// Path is relative to the home directory.
	Path string
	// Holds says what a task would take there.
	Holds string
}

// DefaultDeny are the credentials no task reads unless the operator
// allows one (Config.Allow): what a prompt-injected task would send out
// first. Each is relative to the agent user's home directory, denied
// whether it exists yet or not. A CLI's own login (Codex's auth.json,
// Claude Code's .credentials.json) stays readable to that CLI's attempts:
// the CLI is the task.
var DefaultDeny = []Credential{
	// Keys that open other machines, and sign as the person.
	{".ssh", "SSH private keys, and the hosts they open"},
	{".gnupg", "GnuPG private keys"},
	// Password stores and keyrings.
	{".password-store", "pass's passwords"},
	{".local/share/keyrings", "GNOME Keyring's keyrings"},
	{".local/share/kwalletd", "KDE Wallet's wallets"},
	{".config/op", "the 1Password CLI's accounts"},
	// Clouds.
	{".aws", "AWS access keys and SSO tokens"},
	{".azure", "the Azure CLI's tokens"},
	{".config/gcloud", "Google Cloud's credentials"},
	{".oci", "Oracle Cloud's API keys"},
	{".config/doctl", "DigitalOcean's token"},
	{".config/hcloud", "Hetzner Cloud's tokens"},
	{".pulumi/credentials.json", "Pulumi's access tokens"},
	{".terraform.d/credentials.tfrc.json", "Terraform Cloud's tokens"},
	{".vault-token", "a HashiCorp Vault token"},
	// Forges and git.
	{".config/gh", "the GitHub CLI's token"},
	{".config/hub", "hub's GitHub token"},
	{".config/glab-cli", "the GitLab CLI's token"},
	{".git-credentials", "git's stored passwords and tokens"},
	{".config/git/credentials", "git's stored passwords and tokens"},
	{".netrc", "logins for curl, git and ftp"},
	// Containers and clusters.
	{".docker/config.json", "container registry logins"},
	{".config/containers/auth.json", "Podman's registry logins"},
	{".kube", "Kubernetes clusters' credentials"},
	// Package registries: what publishes as the person.
	{".npmrc", "npm registry tokens"},
	{".yarnrc.yml", "Yarn's registry tokens"},
	{".pypirc", "PyPI upload tokens"},
	{".cargo/credentials", "the crates.io token"},
	{".cargo/credentials.toml", "the crates.io token"},
	{".gem/credentials", "the RubyGems API key"},
	{".m2/settings-security.xml", "Maven's master password"},
	{".config/composer/auth.json", "Composer's repository logins"},
	// Databases.
	{".pgpass", "PostgreSQL passwords"},
	{".my.cnf", "MySQL passwords"},
	// Browsers and mail: cookies are sessions.
	{".mozilla", "Firefox profiles: cookies, saved passwords"},
	{".config/google-chrome", "Chrome profiles: cookies, saved passwords"},
	{".config/chromium", "Chromium profiles: cookies, saved passwords"},
	{".config/BraveSoftware", "Brave profiles: cookies, saved passwords"},
	{".config/microsoft-edge", "Edge profiles: cookies, saved passwords"},
	{".thunderbird", "Thunderbird's mail and passwords"},
	// AI CLIs' logins: an attempt of that CLI reads its own (see above).
	{".codex/auth.json", "Codex's login"},
	{".claude/.credentials.json", "Claude Code's login"},
	{".local/share/opencode/auth.json", "OpenCode's provider logins and keys"},
	{".gemini/oauth_creds.json", "Gemini CLI's Google login"},
	// What people type: tokens in commands.
	{".bash_history", "shell history: tokens typed in commands"},
	{".zsh_history", "shell history: tokens typed in commands"},
}

// homes are the home directories whose credentials are denied: h when
// given, else the agent user's ($HOME, and the account's own when it is
// another: a service may run with a HOME of its own).
func homes(h string) []string {
	if h != "" {
		return []string{h}
	}
	var out []string
	if env := os.Getenv("HOME"); filepath.IsAbs(env) {
		out = append(out, filepath.Clean(env))
	}
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) {
		if d := filepath.Clean(u.HomeDir); len(out) == 0 || out[0] != d {
			out = append(out, d)
		}
	}
	return out
}

// stateMarks are what a control plane keeps in its state directory
// (agent controlplane serve --data-dir) that nothing else does: people's
// tokens, the keys it signs task tokens and console sessions with, its
// lock and its agents.
var stateMarks = []string{"operator-token", "secrets", "notify-secret", "agents.json", "lock"}

// stateSecrets are the credentials in a control plane's state directory,
// denied one by one where the directory cannot be denied whole (it is a
// home directory, or holds one).
var stateSecrets = []string{"token", "operator-token", "secrets", "notify-secret"}

// looksLikeStateDir reports whether dir is, or looks like, a control
// plane's state directory: it holds one of stateMarks (a lock alone is
// anyone's: with it, the task files must be there too).
func looksLikeStateDir(dir string) bool {
	exists := func(name string) bool { _, err := os.Lstat(filepath.Join(dir, name)); return err == nil }
	for _, m := range stateMarks {
		if m == "lock" {
			if exists(m) && exists("tasks") && exists("events") {
				return true
			}
			continue
		}
		if exists(m) {
			return true
		}
	}
	return false
}
