package server

import (
	"os/exec"
	"strings"
	"testing"
)

// The daemon, its metrics and the client do not link the reference
// server: only the command line does. (The agent runs on workstations;
// the server, its store and its crash points have no business there.)
func TestOnlyTheCommandLineLinksTheServer(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	const self = "github.com/edgeagent/agent/controlplane/server"
	for _, pkg := range []string{"agent", "metrics", "controlplane", "controlplane/api"} {
		out, err := exec.Command(goBin, "list", "-deps", "github.com/edgeagent/agent/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == self || strings.HasPrefix(dep, self+"/") {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}
