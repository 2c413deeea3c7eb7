package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// Handshake is what an agent says of itself when it is initialized, and
// what the executor makes of it: what it cannot do for the agent.
type Handshake struct {
	// Path is the binary run; Name and Version are the agent's own
	// (agentInfo).
	Path, Name, Version string
	// Loads: its sessions can be continued (session/load).
	Loads bool
	// Lacks says, a line each, what the agent does not support and what
	// that costs.
	Lacks []string
}

// Handshake starts the agent as an attempt's would be (its environment
// and command line, not confined), initializes it, and ends it: what
// agent doctor reports. It sends no prompt: the model is asked nothing.
// ctx bounds it.
func (x *Executor) Handshake(ctx context.Context) (Handshake, error) {
	conn, path, stop, err := x.startIdle()
	if err != nil {
		return Handshake{}, err
	}
	defer stop()
	init, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientInfo: &sdk.Implementation{Name: "edge-agent", Version: "1"}})
	switch {
	case ctx.Err() != nil:
		return Handshake{Path: path}, fmt.Errorf("%s did not answer initialize: %w", path, ctx.Err())
	case err != nil:
		return Handshake{Path: path}, fmt.Errorf("%s did not initialize: %s", path, errorText(err))
	}
	h := Handshake{Path: path, Loads: init.AgentCapabilities.LoadSession}
	if init.AgentInfo != nil {
		h.Name, h.Version = init.AgentInfo.Name, init.AgentInfo.Version
	}
	if int(init.ProtocolVersion) != sdk.ProtocolVersionNumber {
		return h, fmt.Errorf("%s speaks ACP version %d; the agent speaks version %d", path, init.ProtocolVersion, sdk.ProtocolVersionNumber)
	}
	if t := x.agent.Tested; t.Version != "" && h.Version != t.Version {
		h.Lacks = append(h.Lacks, fmt.Sprintf("version %s: the agent is tested against %s (npm install -g %s@%s)", h.Version, t.Version, t.Package, t.Version))
	}
	if !init.AgentCapabilities.LoadSession {
		h.Lacks = append(h.Lacks, "no continue (it does not load sessions): a cut turn is replayed when nothing happened in it, else left to a person")
	}
	if x.agent.Endpoints == nil {
		h.Lacks = append(h.Lacks, "its model's hosts are not known to the agent: a confined attempt reaches only --egress-allow")
	}
	if x.agent.State == nil {
		h.Lacks = append(h.Lacks, "where it keeps its state is not known to the agent: a confined attempt writes only its work and temporary directories (--isolation-write for more)")
	}
	return h, nil
}

// startIdle starts the agent as an attempt's would be (its environment
// and command line, not confined) for a short exchange of the doctor's:
// it returns the connection to it, the binary run, and stop, which ends
// it (stdin closed, then SIGKILL after the grace) and what it left.
func (x *Executor) startIdle() (conn *sdk.ClientSideConnection, path string, stop func(), err error) {
	path, err = proc.Resolve(x.cfg.Bin)
	if err != nil {
		return nil, "", nil, err
	}
	env := x.Env(runner.AttemptSpec{})
	var cleanup []func()
	undo := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	if x.agent.Prepare != nil {
		dir, err := os.MkdirTemp("", "agent-"+x.cfg.Kind+"-")
		if err != nil {
			return nil, "", nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		more, err := x.agent.Prepare(dir)
		if err != nil {
			undo()
			return nil, "", nil, err
		}
		env = append(env, more...)
	}
	cmd := exec.Command(path, x.args()...)
	cmd.Env, cmd.Dir = env, x.cfg.Dir
	cmd.SysProcAttr = proc.SysProcAttr()
	cmd.Stderr = io.Discard
	stdin, err := cmd.StdinPipe()
	if err != nil {
		undo()
		return nil, "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		undo()
		return nil, "", nil, err
	}
	if err := cmd.Start(); err != nil {
		undo()
		return nil, "", nil, fmt.Errorf("%s: %w", path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop = func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(x.cfg.Grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it left
		undo()
	}
	conn = newConnection(handshakeClient{}, stdin, stdout, slog.New(slog.DiscardHandler))
	return conn, path, stop, nil
}

// handshakeClient answers nothing: an agent being initialized asks
// nothing of its client.
type handshakeClient struct{}

var errNoSession = errors.New("no session: the agent is only being initialized")

func (handshakeClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, errNoSession
}
func (handshakeClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, errNoSession
}
func (handshakeClient) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return cancelledOutcome(), nil
}
func (handshakeClient) SessionUpdate(context.Context, sdk.SessionNotification) error { return nil }
func (handshakeClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errNoSession
}
func (handshakeClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errNoSession
}
func (handshakeClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errNoSession
}
func (handshakeClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errNoSession
}
func (handshakeClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errNoSession
}

// Report is the handshake's line for agent doctor.
func (h Handshake) Report() string {
	who := strings.TrimSpace(h.Name + " " + h.Version)
	if who == "" {
		who = "an unnamed agent"
	}
	what := who + " (" + h.Path + ") speaks ACP"
	if h.Loads {
		what += "; continues its sessions"
	}
	if len(h.Lacks) > 0 {
		what += "; " + strings.Join(h.Lacks, "; ")
	}
	return what
}

var _ cli.Handshaker = (*Executor)(nil)

// AgentHandshake implements cli.Handshaker.
func (x *Executor) AgentHandshake(ctx context.Context) (line string, lacks bool, err error) {
	h, err := x.Handshake(ctx)
	if err != nil {
		return "", false, err
	}
	return h.Report(), len(h.Lacks) > 0, nil
}
