package agent

import (
	"fmt"

	"github.com/edgeagent/agent/isolation"
)

// confine resolves the isolation the agent's configuration asks for on
// this kernel; one it cannot have is a configuration error.
func (c Config) confine() (isolation.Confinement, error) {
	conf, err := isolation.Resolve(c.Isolation, c.DataDir, c.WorkDir)
	if err != nil {
		return conf, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return conf, nil
}
