package keeper

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/landlock"
)

// What an attempt's keeper costs: /bin/true started and waited for
// directly, under a keeper, and under a keeper that confines it with the
// agent's policy (a data directory in a home directory cut out of what it
// reads). Compare the three in one run: the machine's speed cancels out.
func BenchmarkStartAndWait(b *testing.B) {
	home := b.TempDir()
	data := filepath.Join(home, ".local", "state", "agent")
	work := filepath.Join(data, "work", "t-1")
	if err := os.MkdirAll(work, 0o700); err != nil {
		b.Fatal(err)
	}
	policy := &landlock.Policy{Read: []string{"/"}, Write: []string{work, "/tmp", "/dev"}, Deny: []string{data}, ListAll: true}
	for _, c := range []struct {
		name   string
		keeper bool
		policy *landlock.Policy
	}{{"direct", false, nil}, {"keeper", true, nil}, {"keeper+landlock", true, policy}} {
		if c.policy != nil && landlock.ABI() == 0 {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				if !c.keeper {
					if err := cmd.Run(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				p, err := Start(cmd, Sandbox{Files: c.policy}, time.Second, nil)
				if err != nil {
					b.Fatal(err)
				}
				_ = p.Keeper.Wait()
				if st := p.Status(); st.ExitCode != 0 {
					b.Fatalf("status %+v", st)
				}
			}
		})
	}
}
