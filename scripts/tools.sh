#!/usr/bin/env bash
# Installs the real AI CLIs the executors are tested against, pinned, into
# .tools/ (ignored by git), with npm. A second run costs nothing: a stamp
# file names the installed versions.
set -euo pipefail
cd "$(dirname "$0")/.."
CODEX_VERSION=${CODEX_VERSION:-0.169.0}
CLAUDE_VERSION=${CLAUDE_VERSION:-2.1.330}
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
dir=.tools/npm
stamp="$dir/.installed-codex-$CODEX_VERSION-claude-$CLAUDE_VERSION"
if [ -f "$stamp" ]; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "tools: npm is not installed; install Node.js and npm (Debian: apt-get install npm), then run make tools" >&2
	exit 1
fi
mkdir -p "$dir"
# A package.json of its own keeps npm from installing into a parent project.
[ -f "$dir/package.json" ] || echo '{"name":"agent-tools","private":true}' >"$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
	"@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2
codex="$dir/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
claude="$dir/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
"$codex" --version >&2
"$claude" --version >&2
ln -sf "$(pwd)/$codex" .tools/codex
ln -sf "$(pwd)/$claude" .tools/claude
touch "$stamp"
