package main

import (
	"bufio"
	"errors"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"
)

// serviceSpec is what a unit or plist is made from: every path in it
// absolute, every flag one agent run accepts.
type serviceSpec struct {
	serviceTarget
	binary  string   // the agent binary the service runs
	source  string   // this agent binary, symbolic links resolved: install copies it to binary unless they are one
	args    []string // the flags of agent run
	dataDir string   // where the service keeps its state (also in args)
	workDir string   // --work-dir, absolute, or "" (below the data directory)
	// repos are the repositories' paths (--repo, [[repo]]): the agent
	// writes their git directories (it brings each task's branch back).
	repos []string
	// files are the other paths the service reads or writes, by flag:
	// what the sandbox must let it reach.
	files map[string][]string
	path  string // PATH for the service: the installing shell's, absolute entries only
	stop  time.Duration
	// sandbox turns on the unit's hardening (see systemdSandbox).
	sandbox bool
	limits  serviceLimits
}

// Stopping the agent takes, at most: the drain, then each running
// attempt's stop steps (interrupt, close, SIGTERM, each waiting the kill
// grace), the outbox flush, and the last heartbeat saying offline. The
// service manager waits that long plus a margin before SIGKILL.
const (
	stopSteps       = 3
	stopFlush       = 5 * time.Second // agent.Config.FlushTimeout's default
	stopLastBeat    = 2 * time.Second // the agent's offline heartbeat bound
	stopMargin      = 5 * time.Second
	watchdogTimeout = 60 * time.Second
)

func stopTimeout(drain, killGrace time.Duration) time.Duration {
	d := drain + stopSteps*killGrace + stopFlush + stopLastBeat + stopMargin
	return d.Round(time.Second)
}

// mustExist are the path flags whose file the service needs at start.
var mustExist = map[string]bool{"token-file": true, "executor-bin": true, "config": true, "repo": true}

// specFrom checks agent run's flags as the service would get them and
// makes the spec: paths absolute against the current directory, settings
// resolved as agent run would resolve them in the service (its flags, its
// environment file env, the config file), the data directory named
// explicitly so that status and the service agree on it.
func specFrom(args []string, t serviceTarget, env map[string]string) (serviceSpec, error) {
	for _, a := range args {
		if i := strings.IndexFunc(a, unicode.IsControl); i >= 0 {
			return serviceSpec{}, usagef("flag %q holds a control character (%U); a unit is line-based and would be broken by it", visible(a), a[i])
		}
	}
	// The flags must be agent run's, and valid: a unit that fails to start
	// is found out late.
	fs, err := parseRunFlags(args)
	if err != nil {
		return serviceSpec{}, err
	}
	if args, err = absolutePaths(args, fs); err != nil {
		return serviceSpec{}, err
	}
	if fs, err = parseRunFlags(args); err != nil {
		return serviceSpec{}, err
	}
	cfg, err := serviceConfigFile(fs, t, env)
	if err != nil {
		return serviceSpec{}, err
	}
	r, err := agentSettings.resolve(fs, cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return serviceSpec{}, err
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	if get("control-plane") == "" {
		return serviceSpec{}, usagef("give agent run's flags after --, with --control-plane URL (or control-plane in %s)", orNone(cfg))
	}
	if tf := get("token-file"); tf == "" && env["AGENT_TOKEN"] == "" {
		return serviceSpec{}, usagef("give agent run's flags after --, with --token-file (or AGENT_TOKEN in %s: a service never holds the token itself)", t.envFile())
	} else if tf != "" {
		if err := needFile("token-file", tf); err != nil {
			return serviceSpec{}, err
		}
	}
	dataDir := get("data-dir")
	if r.origins["data-dir"].kind == fromDefault {
		dataDir = t.defaultDataDir()
		args = append(args, "--data-dir", dataDir)
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return serviceSpec{}, err
	}
	workDir := get("work-dir")
	if workDir != "" {
		if workDir, err = filepath.Abs(workDir); err != nil {
			return serviceSpec{}, err
		}
	}
	var repos []string
	if vals, err := fs.GetStringArray("repo"); err == nil {
		for _, v := range vals {
			_, p, _ := agentSettings.lookup("repo").splitPair(v)
			repos = append(repos, filePath(p, "."))
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
		return serviceSpec{}, err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return serviceSpec{}, err
	}
	return serviceSpec{serviceTarget: t, binary: self, source: self, args: args, dataDir: dataDir, workDir: workDir, repos: repos, files: files,
		path: servicePath(os.Getenv("PATH")), stop: stopTimeout(drain, kill), sandbox: true}, nil
}

// serviceConfigFile is the config file agent run will read in the
// service, as configPath decides: --config, else AGENT_CONFIG of the
// environment file, else the default file if it exists; "" for none.
func serviceConfigFile(fs *pflag.FlagSet, t serviceTarget, env map[string]string) (string, error) {
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
		return abs, needFile("config", abs)
	}
	p := t.configFile()
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
		abs, err := absolutePath(name, val)
		if err != nil {
			return nil, err
		}
		if mustExist[name] {
			if err := needFile(name, abs); err != nil {
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

func absolutePath(name, p string) (string, error) {
	if p == "" {
		return "", usagef("--%s is empty", name)
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, rest)
	}
	if name == "executor-bin" && !strings.Contains(p, "/") {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", usagef("--executor-bin %s: not found on PATH", p)
		}
		p = found
	}
	return filepath.Abs(p)
}

// needFile refuses a path flag whose file does not exist.
func needFile(name, path string) error {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return usagef("--%s %s: no such file", name, path)
		}
		return usagef("--%s %s: %v", name, path, err)
	}
	return nil
}

// servicePath is PATH for the service: the installing shell's, so that the
// executor's CLI and node are found, less empty and relative entries (they
// would name other directories in the service).
func servicePath(shell string) string {
	var keep []string
	for _, d := range filepath.SplitList(shell) {
		if filepath.IsAbs(d) && !strings.ContainsFunc(d, unicode.IsControl) && !slices.Contains(keep, d) {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 {
		return "/usr/local/bin:/usr/bin:/bin"
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// readEnvFile reads NAME=value lines of a systemd environment file (#
// and ; start comments; a value may be quoted); a missing file is empty.
// Install uses it to resolve settings as the service will see them.
func readEnvFile(path string) (map[string]string, error) {
	env := map[string]string{}
	f, err := os.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return env, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[strings.TrimSpace(k)] = v
	}
	return env, sc.Err()
}

// envFileHeader is what a new environment file says.
const envFileHeader = `# Environment of the agent service, NAME=value per line: secrets such as
# AGENT_TOKEN (instead of --token-file), ANTHROPIC_API_KEY or OPENAI_API_KEY,
# and any AGENT_* setting. Keep it 0600: systemd reads it as root.
`

// ensureEnvFile creates the environment file, 0600 in a 0700 directory,
// if it is missing, and says whether it did.
func ensureEnvFile(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, err
	}
	if _, err := f.WriteString(envFileHeader); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
