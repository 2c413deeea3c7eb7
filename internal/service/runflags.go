package service

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/taskview"
)

// mustExist are the path flags whose file the service needs at start.
var mustExist = map[string]bool{"token-file": true, "executor-bin": true, "config": true, "repo": true}

// RunFlags is how a spec's agent run flags are read: as agent run parses
// them (Parse, refusing what it would refuse) and its settings table.
type RunFlags struct {
	Parse    func(args []string) (*pflag.FlagSet, error)
	Settings *settings.Table
}

// SpecFrom checks agent run's flags as the service would get them and
// makes the spec: paths absolute against the current directory, settings
// resolved as agent run would resolve them in the service (its flags, its
// environment file env, the config file), the data directory named
// explicitly so that status and the service agree on it.
func (rf RunFlags) SpecFrom(args []string, t Target, env map[string]string) (Spec, error) {
	for _, a := range args {
		if i := strings.IndexFunc(a, unicode.IsControl); i >= 0 {
			return Spec{}, usagef("flag %q holds a control character (%U); a unit is line-based and would be broken by it", taskview.Visible(a), a[i])
		}
	}
	// The flags must be agent run's, and valid: a unit that fails to start
	// is found out late.
	fs, err := rf.Parse(args)
	if err != nil {
		return Spec{}, err
	}
	if args, err = rf.absolutePaths(args, fs); err != nil {
		return Spec{}, err
	}
	if fs, err = rf.Parse(args); err != nil {
		return Spec{}, err
	}
	cfg, err := configFile(fs, t, env)
	if err != nil {
		return Spec{}, err
	}
	r, err := rf.Settings.Resolve(fs, cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return Spec{}, err
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	if get("control-plane") == "" {
		return Spec{}, usagef("give agent run's flags after --, with --control-plane URL (or control-plane in %s)", orNone(cfg))
	}
	if tf := get("token-file"); tf == "" && env["AGENT_TOKEN"] == "" {
		return Spec{}, usagef("give agent run's flags after --, with --token-file (or AGENT_TOKEN in %s: a service never holds the token itself)", t.EnvFile())
	} else if tf != "" {
		if err := NeedFile("token-file", tf); err != nil {
			return Spec{}, err
		}
	}
	dataDir := get("data-dir")
	if r.Origins["data-dir"].Kind == settings.FromDefault {
		dataDir = t.DefaultDataDir()
		args = append(args, "--data-dir", dataDir)
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return Spec{}, err
	}
	workDir := get("work-dir")
	if workDir != "" {
		if workDir, err = filepath.Abs(workDir); err != nil {
			return Spec{}, err
		}
	}
	var repos []string
	if vals, err := fs.GetStringArray("repo"); err == nil {
		for _, v := range vals {
			_, p, _ := rf.Settings.Lookup("repo").SplitPair(v)
			repos = append(repos, settings.FilePath(p, "."))
		}
	}
	files := map[string][]string{}
	for _, name := range []string{"token-file", "config", "executor-bin", "isolation-write"} {
		if f := fs.Lookup(name); f != nil {
			if vals, err := fs.GetStringArray(name); err == nil {
				files[name] = vals
			} else if v := f.Value.String(); v != "" {
				files[name] = []string{v}
			}
		}
	}
	if cfg != "" {
		files["config"] = []string{cfg}
	}
	drain, _ := fs.GetDuration("drain-timeout")
	kill, _ := fs.GetDuration("kill-grace")
	self, err := os.Executable()
	if err != nil {
		return Spec{}, err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return Spec{}, err
	}
	return Spec{Target: t, Binary: self, Source: self, Args: args, DataDir: dataDir, WorkDir: workDir, Repos: repos, Files: files,
		Path: ServicePath(os.Getenv("PATH")), Stop: StopTimeout(drain, kill), Sandbox: true}, nil
}

// configFile is the config file agent run will read in the
// service, as configPath decides: --config, else AGENT_CONFIG of the
// environment file, else the default file if it exists; "" for none.
func configFile(fs *pflag.FlagSet, t Target, env map[string]string) (string, error) {
	if f := fs.Lookup("config"); f.Changed {
		return f.Value.String(), nil
	}
	if p, ok := env["AGENT_CONFIG"]; ok {
		if p == "" {
			return "", nil
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return abs, NeedFile("config", abs)
	}
	p := t.ConfigFile()
	if _, err := os.Stat(p); errors.Is(err, iofs.ErrNotExist) {
		return "", nil
	}
	return p, nil
}

func orNone(file string) string {
	if file == "" {
		return "a config file"
	}
	return file
}

// absolutePaths returns args with the value of every path flag made
// absolute (~/ is the home directory; an executor binary without a slash
// is looked up on PATH, as agent run would), refusing a file the service
// needs that is not there. The service's working directory is not the
// installer's, so a relative path would name another file.
func (rf RunFlags) absolutePaths(args []string, fs *pflag.FlagSet) ([]string, error) {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		name, val, hasVal := strings.Cut(strings.TrimPrefix(out[i], "--"), "=")
		f := fs.Lookup(name)
		if !strings.HasPrefix(out[i], "--") || f == nil {
			continue
		}
		at := i // where the value is
		if !hasVal {
			if f.NoOptDefVal != "" {
				continue // a bool given alone
			}
			at = i + 1
			i++
			val = out[at]
		}
		if !rf.isPathFlag(name) {
			continue
		}
		prefix := ""
		if name == "repo" {
			// NAME=PATH: the path is made absolute, not the name.
			repo, path, ok := strings.Cut(val, "=")
			if !ok || repo == "" {
				return nil, usagef("--repo %s: want NAME=PATH", val)
			}
			prefix, val = repo+"=", path
		}
		abs, err := AbsolutePath(name, val)
		if err != nil {
			return nil, err
		}
		if mustExist[name] {
			if err := NeedFile(name, abs); err != nil {
				return nil, err
			}
		}
		if hasVal {
			out[at] = "--" + name + "=" + prefix + abs
		} else {
			out[at] = prefix + abs
		}
	}
	return out, nil
}

// isPathFlag tells whether the flag name takes a path.
func (rf RunFlags) isPathFlag(name string) bool {
	if name == "config" {
		return true
	}
	s := rf.Settings.Lookup(name)
	return s != nil && s.Path
}

// SpecFor is the spec install and print make for the service t running
// agent run with args: resolved as the service will resolve them, its
// environment file included, with its limits and sandbox, and its binary
// placed (Place: bin, noCopy).
func (rf RunFlags) SpecFor(t Target, args []string, lim Limits, sandbox bool, bin string, noCopy bool) (Spec, error) {
	if err := lim.Check(t.Manager); err != nil {
		return Spec{}, err
	}
	env := map[string]string{}
	if t.Manager == Systemd {
		var err error
		if env, err = ReadEnvFile(t.EnvFile()); err != nil {
			return Spec{}, err
		}
	}
	spec, err := rf.SpecFrom(args, t, env)
	if err != nil {
		return spec, err
	}
	spec.Sandbox = sandbox
	spec.Limits = lim
	return spec, spec.Place(bin, noCopy)
}
