package agentsettings

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/doctor"
	"github.com/edgeagent/agent/isolation"
)

// TestResolveLenientlyKeepsGoingPastABadFile: doctor reports a bad config
// file and checks the rest with the flags and the environment.
func TestResolveLenientlyKeepsGoingPastABadFile(t *testing.T) {
	config := filepath.Join(t.TempDir(), "agent.toml")
	must(t, os.WriteFile(config, []byte("max-concurrent = 5\nmax-starts = \"many\"\n"), 0o600))
	t.Setenv("AGENT_MODELS", "m1,m2")
	fs := pflag.NewFlagSet("doctor", pflag.ContinueOnError)
	fs.String("config", "", "")
	var r Run
	r.Bind(fs)
	must(t, fs.Parse([]string{"--config", config, "--executor", "sample"}))
	path, err := ResolveLeniently(fs)
	if path != config || err == nil {
		t.Fatalf("path %q, error %v: want the file and its mistake", path, err)
	}
	if r.Executor.Kind != "sample" || len(r.Models) != 2 || r.MaxConcurrent == 5 {
		t.Errorf("executor %q, models %v, max-concurrent %d: want the flag's and the environment's, not the bad file's", r.Executor.Kind, r.Models, r.MaxConcurrent)
	}
	o := r.Doctor(doctor.Options{DataDir: "/d"}, isolation.Config{Mode: isolation.None}, t.TempDir(), "")
	if o.ExecutorKind != "sample" || o.Executor == nil || o.ExecutorErr != nil || o.DataDir != "/d" || o.Isolation.Mode != isolation.None {
		t.Errorf("doctor options %+v", o)
	}
	r.Executor.Kind = "exec" // and no command
	if o := r.Doctor(doctor.Options{}, isolation.Config{}, t.TempDir(), ""); o.Executor != nil || o.ExecutorErr == nil {
		t.Errorf("exec without a command: executor %v, error %v", o.Executor, o.ExecutorErr)
	}
}
