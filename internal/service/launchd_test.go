package service

import (
	"encoding/xml"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// plistValues decodes a plist's top dict: dict is map[string]any, array
// []any, string and integer string, true and false bool. It fails on XML
// that is not well formed.
func plistValues(t *testing.T, text string) map[string]any {
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
			return value(se).(map[string]any)
		}
	}
}

// A plist says what the agent needs of launchd, escapes XML's special
// characters, and is read back as it was made.
func TestLaunchdPlist(t *testing.T) {
	for _, system := range []bool{false, true} {
		tg := testTarget(t, Launchd, system)
		tg.Name = "b"
		spec := testSpec(tg, "--control-plane", "https://cp.example.com", "--agent-id", `a<b&c>"d'`)
		spec.Stop = StopTimeout(20*time.Second, 5*time.Second)
		spec.Limits = Limits{TasksMax: "300"}
		text := spec.LaunchdPlist()
		p := plistValues(t, text)
		wantArgs := []any{spec.Binary, "run"}
		for _, a := range spec.Args {
			wantArgs = append(wantArgs, a)
		}
		if got, _ := p["ProgramArguments"].([]any); !slices.Equal(got, wantArgs) {
			t.Errorf("ProgramArguments\n got %q\nwant %q", got, wantArgs)
		}
		for k, want := range map[string]any{
			"Label":             "dev.edgeagent.agent.b",
			"RunAtLoad":         true,
			"ProcessType":       "Standard",
			"ExitTimeOut":       "47", // 20s drain + 3 x 5s kill grace + 5s flush + 2s offline + 5s margin
			"StandardOutPath":   tg.LogFile(),
			"StandardErrorPath": tg.LogFile(),
		} {
			if p[k] != want {
				t.Errorf("%s = %#v, want %#v", k, p[k], want)
			}
		}
		if _, ok := p["UserName"]; ok { // root's daemon and a user's agent both run as their own
			t.Errorf("UserName = %#v for a %s job run as uid %s", p["UserName"], map[bool]string{true: "system"}[system], tg.Account.Uid)
		}
		for _, k := range []string{"SoftResourceLimits", "HardResourceLimits"} {
			if got, _ := p[k].(map[string]any); got["NumberOfProcesses"] != "300" {
				t.Errorf("%s = %#v, want NumberOfProcesses 300", k, p[k])
			}
		}
		if env, _ := p["EnvironmentVariables"].(map[string]any); env["PATH"] != spec.Path || len(env) != 1 {
			t.Errorf("EnvironmentVariables = %#v, want PATH only", p["EnvironmentVariables"])
		}
		file := filepath.Join(t.TempDir(), tg.Label()+".plist")
		writeFile(t, file, text)
		inst, err := ReadServiceFile(Launchd, file)
		if err != nil || inst.Binary != spec.Binary || !slices.Equal(inst.Args, spec.Args) || inst.DataDir != spec.DataDir {
			t.Errorf("read back %+v %v", inst, err)
		}
	}
	// A job run as another user says so; infinity sets no process limit.
	tg := testTarget(t, Launchd, true)
	tg.Account.Uid, tg.Account.Username = "501", "builder"
	spec := testSpec(tg)
	spec.Limits = Limits{TasksMax: "infinity"}
	p := plistValues(t, spec.LaunchdPlist())
	if p["UserName"] != "builder" || p["SoftResourceLimits"] != nil {
		t.Errorf("UserName = %#v, SoftResourceLimits = %#v", p["UserName"], p["SoftResourceLimits"])
	}
}

func TestLaunchdState(t *testing.T) {
	t.Parallel()
	out := "gui/501/dev.edgeagent.agent = {\n\tactive count = 1\n\tpath = /Users/me/Library/LaunchAgents/dev.edgeagent.agent.plist\n\tstate = running\n\tpid = 4242\n\tendpoints = {\n\t\tstate = other\n\t}\n}\n"
	if active, pid := launchdState(out); active != "running" || pid != 4242 {
		t.Errorf("launchdState = %q %d, want running 4242", active, pid)
	}
}
