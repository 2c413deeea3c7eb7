package agentsettings

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/doctor"
	"github.com/edgeagent/agent/isolation"
)

// ResolveLeniently resolves the agent's settings fs binds as the root
// command would, but keeps going when they are wrong: a bad config file is
// dropped (the flags and the environment still apply, and what still
// fails keeps its default) and its error returned, for agent doctor to
// report among its checks. path is the config file named or found.
func ResolveLeniently(fs *pflag.FlagSet) (path string, err error) {
	path = Agent.ConfigPath(fs)
	_, err = Agent.Resolve(fs, path, os.LookupEnv)
	if err != nil && path != "" {
		Agent.Resolve(fs, "", os.LookupEnv)
	}
	return path, err
}

// Doctor fills in o what agent doctor checks of r: the executor they make
// (refused, as agent run would, where it would never ask), the models, and
// iso, how attempts are confined.
func (r *Run) Doctor(o doctor.Options, iso isolation.Config, dataDir, workDir string) doctor.Options {
	o.ExecutorKind, o.Models, o.Isolation = r.Executor.Kind, r.Models, iso
	o.Executor, o.ExecutorErr = r.Executor.Build()
	if o.ExecutorErr == nil {
		if err := r.CheckAsks(iso, dataDir, workDir); err != nil {
			o.Executor, o.ExecutorErr = nil, err
		}
	}
	return o
}
