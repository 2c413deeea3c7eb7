package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// buildAgent builds the agent as make build does (static, no cgo) into
// dir, unless cfg names a binary already built.
func buildAgent(cfg config, dir string) (string, error) {
	if cfg.cp.agentBin != "" {
		return cfg.cp.agentBin, nil
	}
	bin := filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/agent")
	build.Dir = cfg.repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the agent: %v\n%s", err, out)
	}
	return bin, nil
}

// cpProc is `agent controlplane serve` running as its own process.
type cpProc struct {
	cmd     *exec.Cmd
	url     string
	pid     int
	exited  chan error
	logPath string
	startup time.Duration // from exec until /healthz answered
}

// cpServe says how to start the control plane.
type cpServe struct {
	bin, dir, secretFile, operatorFile, store string
	heartbeat                                 time.Duration
	pin                                       int // the CPU to pin it to, -1 for none
}

// start runs the control plane on a free loopback port and waits until
// /healthz answers.
func (s cpServe) start() (*cpProc, error) {
	args := []string{"controlplane", "serve", "--addr", "127.0.0.1:0", "--data-dir", s.dir, "--token-file", s.secretFile,
		"--operator-token-file", s.operatorFile, "--log-level", "warn", "--heartbeat-interval", s.heartbeat.String()}
	if s.store != "" {
		args = append(args, "--store", s.store)
	}
	logPath := s.dir + ".log"
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(s.bin, args...)
	// The environment's AGENT_CP_ settings are not this run's.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AGENT_CP_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &cpProc{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan error, 1), logPath: logPath}
	if s.pin >= 0 {
		// Threads made later inherit the mask of the one that makes them.
		pinThreads(p.pid, s.pin)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	go func() { p.exited <- cmd.Wait() }()
	fail := func(err error) (*cpProc, error) {
		p.stop()
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w; its log:\n%s", err, b)
	}
	select {
	case l, ok := <-lines:
		const prefix = "control plane listening on "
		if !ok || !strings.HasPrefix(l, prefix) {
			return fail(fmt.Errorf("the control plane said %q, not where it listens", l))
		}
		p.url, _, _ = strings.Cut(strings.TrimPrefix(l, prefix), " ")
	case err := <-p.exited:
		p.exited <- err
		return fail(fmt.Errorf("the control plane exited: %v", err))
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for {
		resp, err := hc.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return fail(fmt.Errorf("the control plane exited: %v", err))
		case <-time.After(2 * time.Millisecond):
		}
	}
	p.startup = time.Since(start)
	if s.pin >= 0 {
		pinThreads(p.pid, s.pin)
	}
	return p, nil
}

// stop ends the control plane: SIGTERM, then SIGKILL after 30 s.
func (p *cpProc) stop() {
	select {
	case err := <-p.exited:
		p.exited <- err
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		p.exited <- <-p.exited
	}
}

// procCPU is a process's user plus system time so far, from
// /proc/PID/stat (clock ticks of 10 ms), its exited threads included.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut+st) * tick, nil
}

// pinThreads pins every thread of process pid to cpu.
func pinThreads(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return setThreads(pid, &set)
}

func setThreads(pid int, set *unix.CPUSet) error {
	tids, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil {
		return err
	}
	var first error
	for _, t := range tids {
		tid, _ := strconv.Atoi(filepath.Base(t))
		if err := unix.SchedSetaffinity(tid, set); err != nil && first == nil && err != unix.ESRCH {
			first = err
		}
	}
	return first
}

// pinSelf pins this process's threads to cpu and returns what puts them
// back.
func pinSelf(cpu int) (restore func(), err error) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return func() {}, err
	}
	pid := os.Getpid()
	if err := pinThreads(pid, cpu); err != nil {
		setThreads(pid, &old)
		return func() {}, err
	}
	return func() { setThreads(pid, &old) }, nil
}
