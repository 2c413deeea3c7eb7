package runner

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

func TestClassifyRealProviderMessages(t *testing.T) {
	cases := []struct {
		name  string
		f     failure
		class failureClass
		code  state.ErrorCode
	}{
		{"user cancel wins over everything", failure{Cancelled: true, Code: "rate_limit"}, classStop, "cancelled"},
		{"agent shutdown", failure{Shutdown: true, StdioClose: true}, classInterrupted, "agent_shutdown"},
		{"a session that cannot be continued", failure{Code: state.CodeSessionLost, Message: "timeout reading the session"}, classPermanent, "session_lost"},
		{"a workspace that cannot be made", failure{Code: state.CodeWorkspace, Message: "git: connection reset"}, classPermanent, "workspace"},
		{"429 with Retry-After", failure{Code: "rate_limit", Message: "429 Too Many Requests", RetryAfter: 20 * time.Second}, classTransient, "rate_limit"},
		{"429 without a code", failure{Message: "Error: 429 Too Many Requests (no Retry-After header)"}, classTransient, "rate_limit"},
		{"rate limit in words", failure{Message: "Rate limit reached for gpt-5 in organization org-x on tokens per min"}, classTransient, "rate_limit"},
		{"503", failure{Message: "upstream connect error: 503 Service Unavailable"}, classTransient, "unavailable"},
		{"529 overloaded", failure{Message: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}} 529`}, classTransient, "overloaded"},
		{"502 bad gateway", failure{Message: "502 Bad Gateway"}, classTransient, "unavailable"},
		{"504", failure{Message: "504 Gateway Timeout"}, classTransient, "gateway_timeout"},
		{"connection reset", failure{Message: "read tcp 10.0.0.2:51234->104.18.7.192:443: read: connection reset by peer"}, classTransient, "network"},
		{"temporarily unavailable", failure{Message: "The service is temporarily unavailable, try again later"}, classTransient, "unavailable"},
		{"explicit overloaded code", failure{Code: "overloaded"}, classTransient, "overloaded"},
		{"explicit network code", failure{Code: "network", Message: "dial tcp: lookup api: no such host"}, classTransient, "network"},
		{"quota exceeded", failure{Message: "You exceeded your current quota, please check your plan and billing details."}, classPermanent, "quota"},
		{"insufficient_quota inside a 429", failure{Message: `429 {"error":{"code":"insufficient_quota"}}`}, classPermanent, "quota"},
		{"payment required", failure{Message: "402 Payment Required"}, classPermanent, "quota"},
		{"insufficient credits", failure{Message: "Your credit balance is too low: insufficient credits"}, classPermanent, "quota"},
		{"context length", failure{Message: "This model's maximum context length is 200000 tokens. However, you requested 210000 tokens"}, classPermanent, "context_overflow"},
		{"explicit quota code wins over a transient message", failure{Code: "quota", Message: "429 Too Many Requests"}, classPermanent, "quota"},
		{"explicit auth code", failure{Code: "auth", Message: "401 Unauthorized"}, classPermanent, "auth"},
		{"explicit context_overflow", failure{Code: "context_overflow"}, classPermanent, "context_overflow"},
		{"missing binary", failure{StartErr: fmt.Errorf("%w: codex", ErrExecutorNotFound)}, classPermanent, "executor_not_found"},
		{"not executable", failure{StartErr: fmt.Errorf("%w: ./run.sh", ErrNotExecutable)}, classPermanent, "not_executable"},
		{"stdio closed before a result", failure{StdioClose: true}, classTransient, "stdio_closed"},
		{"attempt timeout", failure{Timeout: timeoutAttempt, Signal: "terminated"}, classTransient, "attempt_timeout"},
		{"first-event timeout", failure{Timeout: timeoutFirstEvent}, classTransient, "first_event_timeout"},
		{"plain non-zero exit", failure{ExitCode: 2}, classPermanent, "exit_status"},
		{"a port number is not a 429", failure{Message: "listen tcp :14293: address already in use", ExitCode: 1}, classPermanent, "exit_status"},
		{"unknown explicit code falls through to patterns", failure{Code: "weird", Message: "try again in 5 minutes"}, classTransient, "weird"},
		{"a gateway's timeout is the model's, transient", failure{Code: "gateway_timeout", Message: "upstream timed out"}, classTransient, "gateway_timeout"},
		{"gateway_timeout is transient by its code alone", failure{Code: "gateway_timeout", Message: "upstream gave up", ExitCode: 1}, classTransient, "gateway_timeout"},
		{"an executor's timeout code is not the agent's", failure{Code: "timeout", Message: "upstream request timeout"}, classTransient, "timeout"},
		{"a protocol error is transient", failure{Protocol: fmt.Errorf("garbled line")}, classTransient, "protocol_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := classify(c.f)
			if v.Class != c.class || v.Code != c.code {
				t.Errorf("%s/%s, want %s/%s", v.Class, v.Code, c.class, c.code)
			}
			if v.Message == "" {
				t.Error("no message")
			}
		})
	}
	if v := classify(failure{Code: "rate_limit", RetryAfter: 20 * time.Second}); v.RetryAfter != 20*time.Second {
		t.Errorf("retry-after lost: %v", v.RetryAfter)
	}
	if v := classify(failure{ExitCode: 3}); v.Message != "exit status 3" {
		t.Errorf("message %q", v.Message)
	}
}

func TestHealthSignalOfAFailure(t *testing.T) {
	cases := map[health.Signal]failure{
		health.StartFailure:      {StartErr: ErrExecutorNotFound},
		health.StdioClosed:       {StdioClose: true},
		health.AttemptTimeout:    {Timeout: timeoutAttempt},
		health.FirstEventTimeout: {Timeout: timeoutFirstEvent},
		health.ProtocolError:     {Protocol: fmt.Errorf("bad frame")},
		"":                       {Code: "rate_limit"}, // the provider's trouble, not the executor's
	}
	for want, f := range cases {
		t.Run(string(want), func(t *testing.T) {
			if got := classify(f).Signal; got != want {
				t.Errorf("%+v: signal %q, want %q", f, got, want)
			}
		})
	}
}

// Each of the agent's own limits names its code and its health signal; an
// executor's timeout code is neither.
func TestTimeoutKind(t *testing.T) {
	cases := []struct {
		kind   timeoutKind
		name   string
		code   state.ErrorCode
		signal health.Signal
	}{
		{timeoutNone, "none", "", ""},
		{timeoutFirstEvent, "first_event", state.CodeFirstEventTimeout, health.FirstEventTimeout},
		{timeoutAttempt, "attempt", state.CodeAttemptTimeout, health.AttemptTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.kind.String() != c.name || c.kind.Code() != c.code || c.kind.signal() != c.signal {
				t.Errorf("%s: code %q signal %q, want %s %q %q", c.kind, c.kind.Code(), c.kind.signal(), c.name, c.code, c.signal)
			}
			if c.kind == timeoutNone {
				return
			}
			v := classify(failure{Timeout: c.kind})
			if v.Class != classTransient || v.Code != c.code || v.Signal != c.signal || v.Message == "" {
				t.Errorf("verdict %+v", v)
			}
		})
	}
}
