package shellword

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`codex app-server`:                  `codex|app-server`,
		`  run   --flag=x  `:                `run|--flag=x`,
		`sh -c 'echo $HOME; rm -rf /'`:      `sh|-c|echo $HOME; rm -rf /`,
		`cmd "a b" "say \"hi\"" c\ d`:       `cmd|a b|say "hi"|c d`,
		`x '' y`:                            `x||y`,
		`/opt/my\ tool/bin --model "gpt-5"`: `/opt/my tool/bin|--model|gpt-5`,
	}
	for in, want := range cases {
		got, err := Split(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`a "b`, `a 'b`, `a \`} {
		if _, err := Split(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
