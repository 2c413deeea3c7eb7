package service

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
)

// Spec is what a unit or plist is made from: every path in it absolute,
// every flag one agent run accepts.
type Spec struct {
	Target
	Binary  string   // the agent binary the service runs
	Source  string   // this agent binary, symbolic links resolved: install copies it to Binary unless they are one
	Args    []string // the flags of agent run
	DataDir string   // where the service keeps its state (also in Args)
	WorkDir string   // --work-dir, absolute, or "" (below the data directory)
	// Repos are the repositories' paths (--repo, [[repo]]): the agent
	// writes their git directories (it brings each task's branch back).
	Repos []string
	// Files are the other paths the service reads or writes, by flag:
	// what the sandbox must let it reach.
	Files map[string][]string
	Path  string // PATH for the service: the installing shell's, absolute entries only
	Stop  time.Duration
	// Sandbox turns on the unit's hardening (see systemdSandbox).
	Sandbox bool
	Limits  Limits
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

// StopTimeout is how long the service manager waits for the agent to stop
// before it kills it, for agent run's --drain-timeout and --kill-grace.
func StopTimeout(drain, killGrace time.Duration) time.Duration {
	d := drain + stopSteps*killGrace + stopFlush + stopLastBeat + stopMargin
	return d.Round(time.Second)
}

// AbsolutePath makes the value of the path flag --name absolute (~/ is the
// home directory; an executor binary without a slash is looked up on PATH,
// as agent run would): the service's working directory is not the
// installer's, so a relative path would name another file.
func AbsolutePath(name, p string) (string, error) {
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

// NeedFile refuses the path flag --name whose file does not exist.
func NeedFile(name, path string) error {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return usagef("--%s %s: no such file", name, path)
		}
		return usagef("--%s %s: %v", name, path, err)
	}
	return nil
}

// ServicePath is PATH for the service: the installing shell's, so that the
// executor's CLI and node are found, less empty and relative entries (they
// would name other directories in the service).
func ServicePath(shell string) string {
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

// ReadEnvFile reads NAME=value lines of a systemd environment file (#
// and ; start comments; a value may be quoted); a missing file is empty.
// Install uses it to resolve settings as the service will see them.
func ReadEnvFile(path string) (map[string]string, error) {
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
