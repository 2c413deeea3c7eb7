package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// The README's commands, run as printed: its fenced sh blocks are parsed
// from README.md, so the README cannot drift from what the agent does.

// readmeBlock is a fenced sh block of README.md: the heading it is under
// and its commands, continuation lines joined, comment lines dropped.
type readmeBlock struct {
	heading string
	cmds    []string
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []readmeBlock
		heading string
		in      bool
		cur     readmeBlock
		pending string
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case !in && strings.TrimSpace(line) == "```sh":
			in, cur = true, readmeBlock{heading: heading}
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			trimmed := strings.TrimSpace(line)
			if pending == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
				continue
			}
			if c, ok := strings.CutSuffix(trimmed, `\`); ok {
				pending += c
				continue
			}
			cur.cmds = append(cur.cmds, pending+trimmed)
			pending = ""
		}
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no sh blocks")
	}
	return blocks
}

// readmeBlockUnder is the one sh block under the heading.
func readmeBlockUnder(t *testing.T, heading string) readmeBlock {
	t.Helper()
	var found []readmeBlock
	for _, b := range readmeBlocks(t) {
		if b.heading == heading {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d sh blocks under %q, want 1", len(found), heading)
	}
	return found[0]
}

// shellWords splits a command line as sh does for the quoting the README
// uses: '…', "…", $'…' (with \n), backslashes, and a # that starts a word
// starting a comment.
func shellWords(line string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		has   bool
	)
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			if has {
				words, has = append(words, cur.String()), false
				cur.Reset()
			}
		case ch == '#' && !has:
			return words, nil
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			has = true
		case ch == '\'' || ch == '"' || ch == '$' && i+1 < len(line) && line[i+1] == '\'':
			ansi := ch == '$'
			if ansi {
				i++
				ch = '\''
			}
			end := strings.IndexByte(line[i+1:], ch)
			if end < 0 {
				return nil, fmt.Errorf("unclosed %c in %q", ch, line)
			}
			s := line[i+1 : i+1+end]
			if ansi {
				s = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\'`, `'`).Replace(s)
			}
			cur.WriteString(s)
			has = true
			i += end + 1
		default:
			cur.WriteByte(ch)
			has = true
		}
	}
	if has {
		words = append(words, cur.String())
	}
	return words, nil
}

// Every agent command in the README's sh blocks is a command the agent has,
// with flags it takes and arguments it accepts; the flags `service install`
// passes on after -- are flags agent run takes; a make target is in the
// Makefile. Nothing is run: the command line is parsed as the agent would.
func TestREADMECommandsParse(t *testing.T) {
	t.Parallel()
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range readmeBlocks(t) {
		for _, line := range b.cmds {
			words, err := shellWords(line)
			if err != nil {
				t.Errorf("%s: %v", b.heading, err)
				continue
			}
			switch words[0] {
			case "agent", "bin/agent":
				n++
				if err := parseAgentArgs(words[1:]); err != nil {
					t.Errorf("README (%s): %s: %v", b.heading, line, err)
				}
			case "make":
				if len(words) != 2 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(words[1])+`:`).Match(makefile) {
					t.Errorf("README (%s): %s: no such target in the Makefile", b.heading, line)
				}
			case "journalctl":
				// systemd's, not ours.
			default:
				t.Errorf("README (%s): %s: a command this test does not know; teach it, so the README stays checked", b.heading, line)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d agent commands found in the README; is the parser broken?", n)
	}
}

// parseAgentArgs finds the command args name and parses its flags and
// arguments without running it.
func parseAgentArgs(args []string) error {
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%s is not a command that runs", cmd.CommandPath())
	}
	var after []string // service install's flags for agent run, after --
	if i := indexOf(rest, "--"); i >= 0 {
		rest, after = rest[:i], rest[i+1:]
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	if after != nil {
		if cmd.CommandPath() != "agent service install" {
			return fmt.Errorf("-- after %s", cmd.CommandPath())
		}
		return parseAgentArgs(append([]string{"run"}, after...))
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// The README and the docs cite only files that are in the repository:
// every path in backquotes that starts at one of its top directories
// exists, and no SPEC is cited (there is none in the repository).
func TestREADMECitesFilesInTheRepository(t *testing.T) {
	t.Parallel()
	top, err := os.ReadDir(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tops := map[string]bool{}
	for _, e := range top {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	docs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	cited := regexp.MustCompile("`([A-Za-z0-9_./-]+)`")
	placeholder := regexp.MustCompile(`(^|/)[A-Z_]+(/|$)`)
	for _, f := range append([]string{filepath.Join("..", "..", "README.md")}, docs...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(filepath.Join("..", ".."), f)
		if regexp.MustCompile(`\bSPEC\b`).Match(text) {
			t.Errorf("%s cites the SPEC, which is not in the repository", name)
		}
		for _, m := range cited.FindAllSubmatch(text, -1) {
			p := string(m[1])
			first, _, nested := strings.Cut(p, "/")
			if !nested || !tops[first] || strings.ContainsAny(p, "*") || placeholder.MatchString(p) {
				continue // not a path in the repository, a pattern, or a branch such as agent/TASK_ID
			}
			if _, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(p))); err != nil {
				t.Errorf("%s cites %s, which is not in the repository", name, p)
			}
		}
	}
}

// buildAgent builds the agent as make build does, with a version, into
// dir/bin/agent.
func buildAgent(t *testing.T, dir, version string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin", "agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// newcomer runs the README's commands in a directory of its own, with a
// home of its own and no config file, as a shell would.
type newcomer struct {
	t         *testing.T
	dir, home string
	env       []string
	addr      string // for 127.0.0.1:8080
}

func (n *newcomer) command(line string) *exec.Cmd {
	line = strings.ReplaceAll(line, "127.0.0.1:8080", n.addr)
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir, cmd.Env = n.dir, n.env
	return cmd
}

// run runs line to its end, and fails the test unless it exits 0.
func (n *newcomer) run(line string) string {
	n.t.Helper()
	var out, errb bytes.Buffer
	cmd := n.command(line)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		n.t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, out.String(), errb.String())
	}
	return out.String()
}

// background starts line; its output goes to a file, read with output.
type background struct {
	cmd  *exec.Cmd
	path string
	done chan struct{}
}

func (n *newcomer) start(name, line string) *background {
	n.t.Helper()
	path := filepath.Join(n.t.TempDir(), name+".log")
	f, err := os.Create(path)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	cmd := n.command("exec " + line)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	b := &background{cmd: cmd, path: path, done: make(chan struct{})}
	go func() { cmd.Wait(); close(b.done) }()
	n.t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			cmd.Process.Kill()
			<-b.done
		}
		if n.t.Failed() {
			n.t.Logf("%s output:\n%s", name, tail(b.output(), 4000))
		}
	})
	return b
}

func (b *background) output() string { out, _ := os.ReadFile(b.path); return string(out) }

// stop signals it and waits for its exit code.
func (b *background) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	b.cmd.Process.Signal(sig)
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		t.Fatalf("%v did not stop within a minute of %v", b.cmd.Args, sig)
	}
	return b.cmd.ProcessState.ExitCode()
}

// tasksAt lists the control plane's tasks as agent tasks ls --remote
// --json prints them.
func (n *newcomer) tasksAt() []api.TaskView {
	n.t.Helper()
	var views []api.TaskView
	out := n.run("bin/agent tasks ls --remote --json --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token")
	if err := json.Unmarshal([]byte(out), &views); err != nil {
		n.t.Fatalf("tasks ls --remote --json: %v\n%s", err, out)
	}
	return views
}

func (n *newcomer) phase(id string) state.Phase {
	for _, v := range n.tasksAt() {
		if v.ID == id {
			return v.Phase
		}
	}
	return ""
}

// The README read and done in order, as a newcomer does: the version, the
// quick start (agent demo for make demo, which builds the binary and runs
// it), the whole by-hand run, and the service install as a dry run. Every
// command is the README's own, parsed from it; bin/agent is the binary
// built here as make build builds it.
func TestREADMEAsANewcomer(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the README's commands are sh, run by bash, which is not here")
	}
	dir := t.TempDir()
	const version = "v0.0.0-readme"
	bin := buildAgent(t, dir, version)
	// The home out of a confined task's reach (not /tmp): the README's
	// repository, ~/src/app, is in it, and the agent refuses to serve one
	// a task could write.
	home := gittest.OutOfReach(t)
	n := &newcomer{t: t, dir: dir, home: home, addr: freeAddr(t),
		// No config file of the person running the tests; agents told to
		// beat every 300ms, so the run does not wait on 10s heartbeats.
		env: append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME=", "XDG_STATE_HOME=", "AGENT_CONFIG=", "AGENT_CP_CONFIG=",
			"AGENT_CP_HEARTBEAT_INTERVAL=300ms", "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))}

	t.Run("version", func(t *testing.T) {
		want := "agent " + version + " " + runtime.GOOS + "/" + runtime.GOARCH + " " + runtime.Version() + "\n"
		for _, line := range []string{"bin/agent version", "bin/agent --version"} {
			if got := n.run(line); got != want {
				t.Errorf("%s: %q, want %q", line, got, want)
			}
		}
	})

	t.Run("quick start", func(t *testing.T) {
		b := readmeBlockUnder(t, "Quick start")
		if len(b.cmds) == 0 || !strings.HasPrefix(b.cmds[0], "make demo") {
			t.Fatalf("the quick start begins %q, want make demo", b.cmds)
		}
		// make demo is make build, then this.
		makefile, _ := os.ReadFile(filepath.Join("..", "..", "Makefile"))
		if !regexp.MustCompile(`(?m)^demo: build\n\t\./\$\(BIN\) demo$`).Match(makefile) {
			t.Fatal("make demo no longer runs ./bin/agent demo after make build; change this test with it")
		}
		out := n.run("bin/agent demo")
		for _, want := range []string{"continued by a person", "0 pending, 0 dead", "each once"} {
			if !strings.Contains(out, want) {
				t.Errorf("agent demo does not show %q:\n%s", want, out)
			}
		}
	})

	t.Run("by hand", func(t *testing.T) {
		b := readmeBlockUnder(t, "Running it by hand")
		// The newcomer's own repository, which the README's agent serves
		// as app, with work of theirs not yet committed.
		app := filepath.Join(home, "src", "app")
		must(t, os.MkdirAll(filepath.Dir(app), 0o700))
		gittest.Git(t, home, "init", "-q", "-b", "main", app)
		must(t, os.WriteFile(filepath.Join(app, "login_test.go"), []byte("package login\n"), 0o600))
		gittest.Git(t, app, "add", "-A")
		gittest.Git(t, app, "commit", "-q", "-m", "the login test")
		must(t, os.WriteFile(filepath.Join(app, "login_test.go"), []byte("package login // half done\n"), 0o600))
		var (
			cp, agentRun *background
			ids          []string
			stopped      string // the task that ends recoverable_failed
			onApp        string // the task on app
		)
		waitEnded := func(id string, phases ...state.Phase) state.Phase {
			t.Helper()
			var p state.Phase
			testkit.WaitFor(t, id+" to end", func() bool { p = n.phase(id); return p.Terminal() })
			for _, want := range phases {
				if p == want {
					return p
				}
			}
			t.Fatalf("%s ended %s, want %v", id, p, phases)
			return p
		}
		for _, line := range b.cmds {
			words, err := shellWords(line)
			if err != nil {
				t.Fatal(err)
			}
			if words[0] != "bin/agent" {
				t.Fatalf("%s: the by-hand run is bin/agent's commands", line)
			}
			sub := strings.Join(words[1:3], " ")
			switch {
			case sub == "controlplane serve":
				cp = n.start("controlplane", line)
				testkit.WaitFor(t, "the control plane's operator token", func() bool {
					_, err := os.Stat(filepath.Join(dir, "cp", "operator-token"))
					return err == nil && strings.Contains(cp.output(), "control plane listening")
				})
			case words[1] == "run":
				agentRun = n.start("agent", line)
				testkit.WaitFor(t, "the agent to reach the control plane", func() bool {
					return strings.Contains(agentRun.output(), "control plane reached")
				})
			case words[1] == "submit":
				id := strings.TrimSpace(n.run(line))
				if !regexp.MustCompile(`^t-[0-9a-f]+$`).MatchString(id) {
					t.Fatalf("%s printed %q, want a task id", line, id)
				}
				ids = append(ids, id)
				if slices.Contains(words, "--repo") {
					onApp = id
				}
			case sub == "tasks watch":
				// Piped, it prints a line per change until stopped (q or
				// Ctrl-C on a terminal).
				w := n.start("watch", line)
				testkit.WaitFor(t, "tasks watch to show the tasks", func() bool {
					out := w.output()
					return strings.Contains(out, ids[0]) && strings.Contains(out, ids[len(ids)-1])
				})
				if code := w.stop(t, syscall.SIGINT); code != 0 {
					t.Errorf("tasks watch exited %d on Ctrl-C", code)
				}
			case sub == "tasks continue" || sub == "tasks retry":
				if stopped == "" {
					for _, id := range ids {
						if waitEnded(id, state.PhaseCompleted, state.PhaseRecoverableFailed) == state.PhaseRecoverableFailed {
							stopped = id
						}
					}
					if stopped == "" {
						t.Fatalf("no task the README submits stopped for a person to decide: %v", ids)
					}
				}
				if p := n.phase(stopped); p != state.PhaseRecoverableFailed {
					t.Fatalf("before %s: %s is %s, want recoverable_failed", sub, stopped, p)
				}
				out := n.run(strings.ReplaceAll(line, "TASK_ID", stopped))
				if !strings.Contains(out, "queued again") {
					t.Errorf("%s: %q", line, out)
				}
				if sub == "tasks continue" {
					if !strings.Contains(out, "continuing attempt 1's session") {
						t.Errorf("tasks continue does not continue the session: %q", out)
					}
					waitEnded(stopped, state.PhaseRecoverableFailed) // as the README says: it fails once more
				} else {
					waitEnded(stopped, state.PhaseCompleted)
				}
			default:
				// The first task, as a newcomer would look at it, once it
				// ended (tasks logs -f follows it to its end itself).
				if strings.Contains(line, "TASK_ID") && !strings.Contains(line, " -f") {
					waitEnded(ids[0], state.PhaseCompleted)
				}
				out := n.run(strings.ReplaceAll(line, "TASK_ID", ids[0]))
				for _, want := range readmeWants(sub, ids, ids[0] == onApp) {
					if !strings.Contains(out, want) {
						t.Errorf("%s does not show %q:\n%s", line, want, out)
					}
				}
			}
		}
		if cp == nil || agentRun == nil || len(ids) < 2 || stopped == "" || onApp == "" {
			t.Fatalf("the by-hand run did not start a control plane and an agent, submit tasks (one on the repository) and decide on one that stopped (submitted %v, on app %q)", ids, onApp)
		}
		for _, id := range ids {
			waitEnded(id, state.PhaseCompleted)
		}
		// The task on app worked in a clone of its own: the checkout keeps
		// the newcomer's work as it was.
		if got := gittest.Git(t, app, "status", "--porcelain"); got != "M login_test.go" {
			t.Errorf("the checkout of app: %q, want the newcomer's change alone", got)
		}
		// Stop it with Ctrl-C or SIGTERM: it drains.
		if code := agentRun.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("agent run exited %d on SIGTERM", code)
		}
		if code := cp.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("controlplane serve exited %d on SIGTERM", code)
		}
	})

	t.Run("doctor before the first real task", func(t *testing.T) {
		// The README's doctor line, on a machine whose Codex (the pinned
		// one, on PATH) was never logged in: it says so, with the command
		// that fixes it, and exits 1.
		b := readmeBlockUnder(t, "Installing it as a service")
		var line string
		for _, l := range b.cmds {
			if strings.HasPrefix(l, "agent doctor ") {
				line = l
			}
		}
		if line == "" {
			t.Fatal("the README's service block runs no agent doctor before installing")
		}
		codexDir := filepath.Dir(clitest.CodexBin(t))
		cmd := n.command(line)
		var env []string
		for _, kv := range cmd.Env {
			if name, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(name, "OPENAI_") && !strings.HasPrefix(name, "CODEX_") && name != "PATH" {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "PATH="+codexDir+string(os.PathListSeparator)+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "codex login") {
			t.Fatalf("%s on a machine not logged in: %v\n%s", line, err, out)
		}
	})

	t.Run("service install", func(t *testing.T) {
		// The token the README's install names, where it names it.
		must(t, os.MkdirAll(filepath.Join(home, ".config", "agent"), 0o700))
		must(t, os.WriteFile(filepath.Join(home, ".config", "agent", "token"), []byte(strings.Repeat("ab", 32)+"\n"), 0o600))
		b := readmeBlockUnder(t, "Installing it as a service")
		installs := 0
		for _, line := range b.cmds {
			if !strings.HasPrefix(line, "agent service install ") {
				continue // status, stop, uninstall, journalctl: TestREADMECommandsParse parses them
			}
			installs++
			out := n.run(strings.Replace(line, "agent service install ", "agent service install --dry-run ", 1))
			words, _ := shellWords(line)
			runFlags := strings.Join(words[indexOf(words, "--")+1:], " ")
			runFlags = strings.ReplaceAll(runFlags, "~/", home+"/")
			if !strings.Contains(out, "would write ") || !strings.Contains(out, " run "+runFlags) {
				t.Errorf("%s --dry-run does not show a unit running agent run %s:\n%s", line, runFlags, out)
			}
		}
		if installs != 1 {
			t.Fatalf("%d agent service install lines in the README's service block, want 1", installs)
		}
		if entries, _ := os.ReadDir(filepath.Join(home, ".local")); len(entries) != 0 {
			t.Errorf("a dry run wrote to the home: %v", entries)
		}
	})
}

// readmeWants is what the by-hand run's command sub shows of the tasks
// ids, the first of which has completed, on app when onApp (whose
// checkout held a change of the newcomer's).
func readmeWants(sub string, ids []string, onApp bool) []string {
	switch sub {
	case "tasks ls":
		return ids
	case "tasks show":
		if onApp {
			return []string{ids[0], "completed", "repo:     app", "branch agent/" + ids[0] + " from main",
				"checkout: the checkout of app has uncommitted changes (1 file changed); this task starts from main at"}
		}
		return []string{ids[0], "completed"}
	case "tasks logs":
		return []string{"-- completed"}
	case "outbox stats":
		return []string{"pending"}
	case "health":
		return []string{"available"}
	}
	return nil
}
