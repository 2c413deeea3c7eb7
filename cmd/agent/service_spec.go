package main

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/taskview"
)

// mustExist are the path flags whose file the service needs at start.
var mustExist = map[string]bool{"token-file": true, "executor-bin": true, "config": true, "repo": true}

// specFrom checks agent run's flags as the service would get them and
// makes the spec: paths absolute against the current directory, settings
// resolved as agent run would resolve them in the service (its flags, its
// environment file env, the config file), the data directory named
// explicitly so that status and the service agree on it.
func specFrom(args []string, t service.Target, env map[string]string) (service.Spec, error) {
	for _, a := range args {
		if i := strings.IndexFunc(a, unicode.IsControl); i >= 0 {
			return service.Spec{}, usagef("flag %q holds a control character (%U); a unit is line-based and would be broken by it", taskview.Visible(a), a[i])
		}
	}
	// The flags must be agent run's, and valid: a unit that fails to start
	// is found out late.
	fs, err := parseRunFlags(args)
	if err != nil {
		return service.Spec{}, err
	}
	if args, err = absolutePaths(args, fs); err != nil {
		return service.Spec{}, err
	}
	if fs, err = parseRunFlags(args); err != nil {
		return service.Spec{}, err
	}
	cfg, err := serviceConfigFile(fs, t, env)
	if err != nil {
		return service.Spec{}, err
	}
	r, err := agentSettings.resolve(fs, cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return service.Spec{}, err
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	if get("control-plane") == "" {
		return service.Spec{}, usagef("give agent run's flags after --, with --control-plane URL (or control-plane in %s)", orNone(cfg))
	}
	if tf := get("token-file"); tf == "" && env["AGENT_TOKEN"] == "" {
		return service.Spec{}, usagef("give agent run's flags after --, with --token-file (or AGENT_TOKEN in %s: a service never holds the token itself)", t.EnvFile())
	} else if tf != "" {
		if err := service.NeedFile("token-file", tf); err != nil {
			return service.Spec{}, err
		}
	}
	dataDir := get("data-dir")
	if r.origins["data-dir"].kind == fromDefault {
		dataDir = t.DefaultDataDir()
		args = append(args, "--data-dir", dataDir)
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return service.Spec{}, err
	}
	workDir := get("work-dir")
	if workDir != "" {
		if workDir, err = filepath.Abs(workDir); err != nil {
			return service.Spec{}, err
		}
	}
	var repos []string
	if vals, err := fs.GetStringArray("repo"); err == nil {
		for _, v := range vals {
			_, p, _ := agentSettings.lookup("repo").splitPair(v)
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
		return service.Spec{}, err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return service.Spec{}, err
	}
	return service.Spec{Target: t, Binary: self, Source: self, Args: args, DataDir: dataDir, WorkDir: workDir, Repos: repos, Files: files,
		Path: service.ServicePath(os.Getenv("PATH")), Stop: service.StopTimeout(drain, kill), Sandbox: true}, nil
}

// serviceConfigFile is the config file agent run will read in the
// service, as configPath decides: --config, else AGENT_CONFIG of the
// environment file, else the default file if it exists; "" for none.
func serviceConfigFile(fs *pflag.FlagSet, t service.Target, env map[string]string) (string, error) {
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
		return abs, service.NeedFile("config", abs)
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

// parseRunFlags parses args as agent run would, refusing what it would
// refuse.
func parseRunFlags(args []string) (*pflag.FlagSet, error) {
	run := newRunCmd()
	if err := run.ParseFlags(args); err != nil {
		return nil, usagef("agent run would refuse these flags: %v", err)
	}
	if rest := run.Flags().Args(); len(rest) > 0 {
		return nil, usagef("agent run takes no arguments, only flags: %q", rest)
	}
	return run.Flags(), nil
}

// absolutePaths returns args with the value of every path flag made
// absolute (~/ is the home directory; an executor binary without a slash
// is looked up on PATH, as agent run would), refusing a file the service
// needs that is not there. The service's working directory is not the
// installer's, so a relative path would name another file.
func absolutePaths(args []string, fs *pflag.FlagSet) ([]string, error) {
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
		if !isPathFlag(name) {
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
		abs, err := service.AbsolutePath(name, val)
		if err != nil {
			return nil, err
		}
		if mustExist[name] {
			if err := service.NeedFile(name, abs); err != nil {
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

func isPathFlag(name string) bool {
	if name == "config" {
		return true
	}
	s := agentSettings.lookup(name)
	return s != nil && s.path
}

// specForCmd makes the spec from the command's flags and agent run's
// flags after --.
func specForCmd(f *serviceFlags, lim service.Limits, noSandbox bool, bin binFlags, args []string) (service.Spec, error) {
	t, err := f.target()
	if err != nil {
		return service.Spec{}, err
	}
	if err := lim.Check(t.Manager); err != nil {
		return service.Spec{}, err
	}
	env := map[string]string{}
	if t.Manager == service.Systemd {
		if env, err = service.ReadEnvFile(t.EnvFile()); err != nil {
			return service.Spec{}, err
		}
	}
	spec, err := specFrom(args, t, env)
	if err != nil {
		return spec, err
	}
	spec.Sandbox = !noSandbox
	spec.Limits = lim
	return spec, spec.Place(bin.path, bin.noCopy)
}
