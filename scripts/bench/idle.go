package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/edgeagent/agent/controlplane"
)

// idleResult is the idle agent's cost.
type idleResult struct {
	WindowS    float64 `json:"window_s"`
	CPUPercent float64 `json:"cpu_percent"` // of one core, over the window
	RSSBytes   int64   `json:"rss_bytes"`   // VmRSS at the end of the window
	// VmRSS's two parts: memory of the process's own (heap, stacks, the
	// runtime's), and pages of files it maps (its binary, shared and
	// reclaimable).
	RSSAnonBytes int64 `json:"rss_anon_bytes,omitempty"`
	RSSFileBytes int64 `json:"rss_file_bytes,omitempty"`
}

// idleSection builds the agent, starts `agent run` against a control
// plane in this process with no work for it, lets it settle, and reads
// its CPU time (schedstat of every thread) and RSS from /proc over the
// window.
func idleSection(cfg config, fx *fixture, log *log.Logger) (*idleResult, error) {
	dir, err := os.MkdirTemp(fx.base, "idle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "agent")
	// Built as make build builds it: static, no cgo.
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/agent")
	build.Dir = cfg.repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the agent: %v\n%s", err, out)
	}
	srv, err := startServer(filepath.Join(dir, "cp"), fx.token, 0)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(fx.token+"\n"), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "run", "--control-plane", srv.url, "--token-file", tokenFile,
		"--data-dir", filepath.Join(dir, "data"), "--executor", "sample", "--agent-id", "bench-idle")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		}
	}()
	if err := waitOnline(srv.url, fx.opToken, "bench-idle", exited); err != nil {
		b, _ := os.ReadFile(logFile.Name())
		return nil, fmt.Errorf("%w; its log:\n%s", err, b)
	}
	time.Sleep(time.Second) // past start-up
	pid := cmd.Process.Pid
	cpu0, err := onCPU(pid)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	select {
	case err := <-exited:
		return nil, fmt.Errorf("the agent exited during the window: %v", err)
	case <-time.After(cfg.idleWindow):
	}
	cpu1, err := onCPU(pid)
	if err != nil {
		return nil, err
	}
	window := time.Since(start)
	mem, err := statusFields(strconv.Itoa(pid), "VmRSS", "RssAnon", "RssFile")
	if err != nil {
		return nil, err
	}
	rss, anon, file := mem[0], mem[1], mem[2]
	res := &idleResult{WindowS: window.Seconds(), CPUPercent: 100 * float64(cpu1-cpu0) / float64(window), RSSBytes: rss,
		RSSAnonBytes: anon, RSSFileBytes: file}
	log.Printf("idle agent: %.3f %% of a core, %.1f MB RSS (%.1f MB its own, %.1f MB of files) over %.0f s",
		res.CPUPercent, float64(rss)/1e6, float64(anon)/1e6, float64(file)/1e6, res.WindowS)
	return res, nil
}

// waitOnline waits until the control plane has heard from the agent, or
// the agent exits. It sets no time limit of its own: a slow machine is
// not a failure (go test's -timeout bounds a hung run).
func waitOnline(url, token, id string, exited chan error) error {
	client, err := controlplane.NewClient(url, token, controlplane.ClientOptions{})
	if err != nil {
		return err
	}
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("agent run exited before its first heartbeat: %v", err)
		case <-poll.C:
		}
		agents, err := client.Agents(context.Background())
		if err != nil {
			continue
		}
		for _, a := range agents {
			if a.AgentID == id {
				return nil
			}
		}
	}
}
