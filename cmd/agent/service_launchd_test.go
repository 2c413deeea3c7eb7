package main

import (
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// parsePlist decodes a plist's top dict: dict is map[string]any, array
// []any, string and integer string, true and false bool. It fails on XML
// that is not well formed.
func parsePlist(t *testing.T, text string) map[string]any {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(text))
	var value func(se xml.StartElement) any
	value = func(se xml.StartElement) any {
		switch se.Name.Local {
		case "dict", "array", "plist":
			m, list, key := map[string]any{}, []any{}, ""
			for {
				tok, err := d.Token()
				if err != nil {
					t.Fatalf("plist: %v", err)
				}
				switch tok := tok.(type) {
				case xml.EndElement:
					if se.Name.Local == "dict" {
						return m
					}
					if se.Name.Local == "plist" {
						return list[0]
					}
					return list
				case xml.StartElement:
					if tok.Name.Local == "key" {
						must(t, d.DecodeElement(&key, &tok))
						continue
					}
					v := value(tok)
					if se.Name.Local == "dict" {
						m[key] = v
					} else {
						list = append(list, v)
					}
				}
			}
		case "true", "false":
			must(t, d.Skip())
			return se.Name.Local == "true"
		default:
			var s string
			must(t, d.DecodeElement(&s, &se))
			return s
		}
	}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			t.Fatal("plist: no <plist> element")
		}
		if err != nil {
			t.Fatalf("plist: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "plist" {
			top := value(se).(map[string]any)
			for {
				tok, err := d.Token()
				if errors.Is(err, io.EOF) {
					return top
				}
				if cd, ok := tok.(xml.CharData); err != nil || !ok || strings.TrimSpace(string(cd)) != "" {
					t.Fatalf("plist: more after </plist>: %v %v", tok, err)
				}
			}
		}
	}
}

func TestLaunchdPlist(t *testing.T) {
	_, stateHome := serviceEnv(t)
	tok := tokenFile(t)
	// An id with XML's special characters must come back as it went in.
	args := []string{"--control-plane", "https://cp.example.com", "--token-file", tok, "--agent-id", `a<b&c>"d'`, "--drain-timeout", "20s"}
	spec := testSpec(t, false, launchd, nil, args...)
	p := parsePlist(t, spec.launchdPlist())

	wantArgs := append(append([]any{spec.binary, "run"}, toAny(args)...), "--data-dir", stateHome+"/agent")
	if got, _ := p["ProgramArguments"].([]any); !slices.Equal(got, wantArgs) {
		t.Errorf("ProgramArguments\n got %q\nwant %q", got, wantArgs)
	}
	if got, err := plistProgramArguments(spec.launchdPlist()); err != nil || !slices.Equal(toAny(got), wantArgs) {
		t.Errorf("plistProgramArguments: %q %v", got, err)
	}
	log := spec.logFile()
	for k, want := range map[string]any{
		"Label":             launchdLabel,
		"RunAtLoad":         true,
		"ProcessType":       "Standard",
		"ExitTimeOut":       "47", // 20s drain + 3 x 5s kill grace + 5s flush + 2s offline + 5s margin
		"StandardOutPath":   log,
		"StandardErrorPath": log,
	} {
		if p[k] != want {
			t.Errorf("%s = %#v, want %#v", k, p[k], want)
		}
	}
	if ka, _ := p["KeepAlive"].(map[string]any); ka["SuccessfulExit"] != false {
		t.Errorf("KeepAlive = %#v, want SuccessfulExit false (restart on failure only)", p["KeepAlive"])
	}
	if env, _ := p["EnvironmentVariables"].(map[string]any); env["PATH"] != spec.path || len(env) != 1 {
		t.Errorf("EnvironmentVariables = %#v, want PATH only", p["EnvironmentVariables"])
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func TestLaunchdState(t *testing.T) {
	t.Parallel()
	out := "gui/501/dev.edgeagent.agent = {\n\tactive count = 1\n\tpath = /Users/me/Library/LaunchAgents/dev.edgeagent.agent.plist\n\tstate = running\n\tpid = 4242\n\tendpoints = {\n\t\tstate = other\n\t}\n}\n"
	if active, pid := launchdState(out); active != "running" || pid != 4242 {
		t.Errorf("launchdState = %q %d, want running 4242", active, pid)
	}
}
