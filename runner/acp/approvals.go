package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// RequestPermission implements acp.Client: the agent asks before a tool
// call. The executor answers by its approval policy, or asks a person
// and waits (the agent waits with it). never and decline decline, and
// the decline is a denied call; what a person declines the runner
// records.
func (s *session) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	s.mu.Lock()
	if s.noAsk {
		s.mu.Unlock()
		return cancelledOutcome(), nil
	}
	s.asking.Add(1)
	defer s.asking.Done()
	id := string(p.ToolCall.ToolCallId)
	call := s.tools[id]
	if call == nil {
		call = &toolCall{}
		if len(s.tools) < maxTools {
			s.tools[id] = call
		}
	}
	call.merge(p.ToolCall.Kind, p.ToolCall.Title, p.ToolCall.RawInput, p.ToolCall.Locations, p.ToolCall.Content)
	req := s.approvalRequest(id, call)
	s.mu.Unlock()

	policy := s.x.cfg.Approval
	answer, why := runner.ApprovalDecline, "declined by the approval policy"
	asked := false
	switch policy {
	case runner.ApprovalAcceptAll:
		answer = runner.ApprovalAccept
	case runner.ApprovalNever:
		why = "nobody is asked (--approval never)"
	case runner.ApprovalAsk:
		if s.spec.Ask == nil {
			why = "nobody can be asked"
			break
		}
		asked = true
		s.mu.Lock()
		s.asked[id] = true
		s.mu.Unlock()
		actx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(s.askCtx, cancel)
		answer = s.spec.Ask(actx, req)
		stop()
		cancel()
	}
	if !asked {
		s.send(runner.Event{Type: runner.EventLog, Level: runner.LevelInfo, Message: fmt.Sprintf("approval %s by policy %s: %s", answer, policy, req.What())})
	}
	if answer != runner.ApprovalAccept {
		s.mu.Lock()
		s.declined[id] = true
		if !asked {
			s.sendLocked(runner.Event{Type: runner.EventDenied, Name: req.Tool, Description: req.What(), Message: why})
		}
		s.mu.Unlock()
	}
	return outcome(p.Options, answer), nil
}

// outcome is the agent's option for an answer: allow once (else always)
// for accept, reject once (else always) for decline; cancelled for a
// cancel, or when the agent offers no such option.
func outcome(options []sdk.PermissionOption, answer runner.Approval) sdk.RequestPermissionResponse {
	var want []sdk.PermissionOptionKind
	switch answer {
	case runner.ApprovalAccept:
		want = []sdk.PermissionOptionKind{sdk.PermissionOptionKindAllowOnce, sdk.PermissionOptionKindAllowAlways}
	case runner.ApprovalDecline:
		want = []sdk.PermissionOptionKind{sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways}
	}
	for _, k := range want {
		for _, o := range options {
			if o.Kind == k {
				return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: o.OptionId, Outcome: "selected"}}}
			}
		}
	}
	return cancelledOutcome()
}

func cancelledOutcome() sdk.RequestPermissionResponse {
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}
}

// approvalRequest says what a tool call would do: a command and where it
// runs, a file change's paths and diff, or another tool's input.
func (s *session) approvalRequest(id string, t *toolCall) state.ApprovalRequest {
	req := state.ApprovalRequest{ID: id, Tool: t.name()}
	switch t.kind {
	case sdk.ToolKindExecute:
		req.Kind, req.Command = state.ApprovalCommand, t.command()
		req.Cwd = t.str("cwd", "workdir", "dir_path", "directory")
		if req.Cwd == "" {
			req.Cwd = s.dir
		}
		req.Reason = t.str("description", "justification", "reason")
	case sdk.ToolKindEdit, sdk.ToolKindDelete, sdk.ToolKindMove:
		req.Kind, req.Paths = state.ApprovalFileChange, t.paths()
		req.Diff = unifiedDiff(t.diffs)
		if req.Diff == "" {
			req.Diff = t.str("diff", "patch")
		}
	default:
		req.Kind = state.ApprovalTool
		if t.title != "" {
			req.Tool = t.title
		}
		if b, err := json.Marshal(t.input); err == nil && t.input != nil {
			req.Input = string(b)
		}
	}
	req.Bound()
	return req
}

// unifiedDiff renders an ACP diff (each file's old and new text) as one
// unified diff: a new file's content as added lines, a change as its old
// lines removed and its new ones added. It is the change, whole, not the
// smallest diff of it.
func unifiedDiff(diffs []sdk.ToolCallContentDiff) string {
	var b strings.Builder
	for _, d := range diffs {
		newLines := splitLines(d.NewText)
		if d.OldText == nil || *d.OldText == "" {
			fmt.Fprintf(&b, "--- /dev/null\n+++ %s\n@@ -0,0 +1,%d @@\n", d.Path, len(newLines))
			for _, l := range newLines {
				b.WriteString("+" + l + "\n")
			}
			continue
		}
		oldLines := splitLines(*d.OldText)
		fmt.Fprintf(&b, "--- %s\n+++ %s\n@@ -1,%d +1,%d @@\n", d.Path, d.Path, len(oldLines), len(newLines))
		for _, l := range oldLines {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range newLines {
			b.WriteString("+" + l + "\n")
		}
	}
	return b.String()
}

func splitLines(text string) []string {
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// The executor offers the agent neither its file system nor terminals
// (its client capabilities say so): the agent uses its own tools, inside
// the attempt's confinement. A request for them is refused.

// ReadTextFile implements acp.Client.
func (s *session) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}

// WriteTextFile implements acp.Client.
func (s *session) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}

// CreateTerminal implements acp.Client.
func (s *session) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}

// KillTerminal implements acp.Client.
func (s *session) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalKill)
}

// TerminalOutput implements acp.Client.
func (s *session) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalOutput)
}

// ReleaseTerminal implements acp.Client.
func (s *session) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalRelease)
}

// WaitForTerminalExit implements acp.Client.
func (s *session) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalWaitForExit)
}
