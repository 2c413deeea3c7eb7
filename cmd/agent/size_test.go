package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestByteSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    byteSize
		str     string
		wantErr string
	}{
		{"4096", 4096, "4KiB", ""},
		{"1000", 1000, "1KB", ""},
		{"123", 123, "123", ""},
		{"0", 0, "0", ""},
		{"512KiB", 512 << 10, "512KiB", ""},
		{"10 GiB", 10 << 30, "10GiB", ""},
		{"5gb", 5e9, "5GB", ""},
		{"1TiB", 1 << 40, "1TiB", ""},
		{"12XB", 0, "", `unknown unit "XB"`},
		{"-1", 0, "", "want a whole number"},
		{"1.5GiB", 0, "", "want a whole number"},
		{"99999999TiB", 0, "", "too large"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseSize(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || got.String() != tc.str {
				t.Fatalf("parseSize(%q) = %d (%s), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.str)
			}
			if back, err := parseSize(got.String()); err != nil || back != got {
				t.Fatalf("%s does not read back: %d, %v", got, back, err)
			}
		})
	}
}

// A size in the config file is a number of bytes or a string with a unit.
func TestConfigSizes(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "agent.toml")
	writeFile(t, file, "retention-max-size = \"2GiB\"\ntask-log-max-size = 65536\nretention = \"72h\"\n")
	r := runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "config", "print")
	for key, want := range map[string]string{"retention-max-size": `"2GiB"`, "task-log-max-size": `"64KiB"`, "retention": `"72h0m0s"`} {
		if v, _ := printed(t, r.stdout, key); v != want {
			t.Errorf("%s = %s, want %s", key, v, want)
		}
	}
	writeFile(t, file, "task-log-max-size = \"1KiB\"\n")
	wantOneLineError(t, runAgentEnv(t, nil, "config", "check", file), 2, ":1: task-log-max-size = 1KiB: want at least 4KiB")
}
