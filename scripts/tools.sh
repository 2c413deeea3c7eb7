#!/usr/bin/env bash
# Installs the real AI CLIs the executors are tested against into .tools/
# (ignored by git) from a committed npm project: scripts/tools/package.json
# pins them exactly and scripts/tools/package-lock.json holds every package
# (the platform packages too) with its sha512 integrity. npm ci installs
# exactly that lock and fails on any hash that does not match;
# --ignore-scripts runs no package's install scripts. A second run costs
# nothing: a stamp names the lock's checksum, and a changed lock reinstalls.
# To move a pin: edit package.json, then in scripts/tools run
# npm install --package-lock-only, and commit both files.
set -euo pipefail
cd "$(dirname "$0")/.."
src=scripts/tools
# tmux drives the live terminal test of `agent tasks watch`, which skips
# without it: install it from the system's packages when we can.
if ! command -v tmux >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux; } >/dev/null ||
			echo "tools: could not install tmux; the live terminal test will skip" >&2
	else
		echo "tools: tmux is not installed; the live terminal test will skip (Debian: apt-get install tmux)" >&2
	fi
fi
# Chromium drives the console's browser tests (internal/browsertest), which
# skip without it (and fail under CI=true): the distribution's package.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null ||
			echo "tools: could not install chromium; the console's browser tests will skip" >&2
	else
		echo "tools: chromium is not installed; the console's browser tests will skip (Debian: apt-get install chromium)" >&2
	fi
fi
sha256() { if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi; }
sum=$(cat "$src/package.json" "$src/package-lock.json" "$src/.npmrc" | sha256 | cut -c1-16)
dir=.tools/npm
stamp="$dir/.installed-lock-$sum"
# The binaries inside the platform packages: with --ignore-scripts,
# claude-code's postinstall does not put the native binary at its
# bin/claude.exe, so the link goes to the platform package's own.
codex="$dir/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
claude="$dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
opencode="$dir/node_modules/opencode-linux-x64/bin/opencode"
codex_acp="$dir/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp"
# Gemini CLI and claude-code-acp are Node.js scripts (run by the node on
# PATH).
gemini="$dir/node_modules/@google/gemini-cli/bundle/gemini.js"
claude_code_acp="$dir/node_modules/@zed-industries/claude-code-acp/dist/index.js"
if [ -f "$stamp" ] && [ -x .tools/codex ] && [ -x .tools/claude ] && [ -x .tools/opencode ] && [ -x .tools/codex-acp ] && [ -x .tools/gemini ] && [ -x .tools/claude-code-acp ]; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "tools: npm is not installed; install Node.js and npm (Debian: apt-get install npm), then run make tools" >&2
	exit 1
fi
mkdir -p "$dir"
rm -f "$dir"/.installed-*
# The project is copied, not installed in place: npm ci writes
# node_modules beside its package.json, and that belongs in .tools/.
cp "$src/package.json" "$src/package-lock.json" "$src/.npmrc" "$dir/"
(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
"$codex" --version >&2
"$claude" --version >&2
"$opencode" --version >&2
node "$gemini" --version >&2
test -x "$codex_acp" # it has no --version: it speaks ACP on stdin at once
test -x "$claude_code_acp" # nor has it
ln -sf "$(pwd)/$codex" .tools/codex
ln -sf "$(pwd)/$claude" .tools/claude
ln -sf "$(pwd)/$opencode" .tools/opencode
ln -sf "$(pwd)/$codex_acp" .tools/codex-acp
ln -sf "$(pwd)/$gemini" .tools/gemini
ln -sf "$(pwd)/$claude_code_acp" .tools/claude-code-acp
touch "$stamp"
