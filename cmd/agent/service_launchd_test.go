package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/service"
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
	spec := testSpec(t, false, service.Launchd, nil, args...)
	p := parsePlist(t, spec.LaunchdPlist())

	wantArgs := append(append([]any{spec.Binary, "run"}, toAny(args)...), "--data-dir", stateHome+"/agent")
	if got, _ := p["ProgramArguments"].([]any); !slices.Equal(got, wantArgs) {
		t.Errorf("ProgramArguments\n got %q\nwant %q", got, wantArgs)
	}
	plist := filepath.Join(t.TempDir(), "agent.plist")
	must(t, os.WriteFile(plist, []byte(spec.LaunchdPlist()), 0o644))
	if inst, err := service.ReadServiceFile(service.Launchd, plist); err != nil || !slices.Equal(toAny(append([]string{inst.Binary, "run"}, inst.Args...)), wantArgs) {
		t.Errorf("ReadServiceFile: %+v %v", inst, err)
	}
	log := spec.LogFile()
	for k, want := range map[string]any{
		"Label":             service.LaunchdLabel,
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
	if env, _ := p["EnvironmentVariables"].(map[string]any); env["PATH"] != spec.Path || len(env) != 1 {
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
