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
		f     Failure
		class Class
		code  state.ErrorCode
	}{
		{"user cancel wins over everything", Failure{Cancelled: true, Code: "rate_limit"}, Stop, "cancelled"},
		{"agent shutdown", Failure{Shutdown: true, StdioClose: true}, Stop, "agent_shutdown"},
		{"429 with Retry-After", Failure{Code: "rate_limit", Message: "429 Too Many Requests", RetryAfter: 20 * time.Second}, Transient, "rate_limit"},
		{"429 without a code", Failure{Message: "Error: 429 Too Many Requests (no Retry-After header)"}, Transient, "exit_status"},
		{"rate limit in words", Failure{Message: "Rate limit reached for gpt-5 in organization org-x on tokens per min"}, Transient, "exit_status"},
		{"503", Failure{Message: "upstream connect error: 503 Service Unavailable"}, Transient, "exit_status"},
		{"529 overloaded", Failure{Message: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}} 529`}, Transient, "exit_status"},
		{"502 bad gateway", Failure{Message: "502 Bad Gateway"}, Transient, "exit_status"},
		{"504", Failure{Message: "504 Gateway Timeout"}, Transient, "exit_status"},
		{"connection reset", Failure{Message: "read tcp 10.0.0.2:51234->104.18.7.192:443: read: connection reset by peer"}, Transient, "exit_status"},
		{"temporarily unavailable", Failure{Message: "The service is temporarily unavailable, try again later"}, Transient, "exit_status"},
		{"explicit overloaded code", Failure{Code: "overloaded"}, Transient, "overloaded"},
		{"explicit network code", Failure{Code: "network", Message: "dial tcp: lookup api: no such host"}, Transient, "network"},
		{"quota exceeded", Failure{Message: "You exceeded your current quota, please check your plan and billing details."}, Permanent, "exit_status"},
		{"insufficient_quota inside a 429", Failure{Message: `429 {"error":{"code":"insufficient_quota"}}`}, Permanent, "exit_status"},
		{"payment required", Failure{Message: "402 Payment Required"}, Permanent, "exit_status"},
		{"insufficient credits", Failure{Message: "Your credit balance is too low: insufficient credits"}, Permanent, "exit_status"},
		{"context length", Failure{Message: "This model's maximum context length is 200000 tokens. However, you requested 210000 tokens"}, Permanent, "exit_status"},
		{"explicit quota code wins over a transient message", Failure{Code: "quota", Message: "429 Too Many Requests"}, Permanent, "quota"},
		{"explicit auth code", Failure{Code: "auth", Message: "401 Unauthorized"}, Permanent, "auth"},
		{"explicit context_overflow", Failure{Code: "context_overflow"}, Permanent, "context_overflow"},
		{"missing binary", Failure{StartErr: fmt.Errorf("%w: codex", ErrExecutorNotFound)}, Permanent, "executor_not_found"},
		{"not executable", Failure{StartErr: fmt.Errorf("%w: ./run.sh", ErrNotExecutable)}, Permanent, "not_executable"},
		{"stdio closed before a result", Failure{StdioClose: true}, Transient, "stdio_closed"},
		{"attempt timeout", Failure{Timeout: TimeoutAttempt, Signal: "terminated"}, Transient, "attempt_timeout"},
		{"first-event timeout", Failure{Timeout: TimeoutFirstEvent}, Transient, "first_event_timeout"},
		{"plain non-zero exit", Failure{ExitCode: 2}, Permanent, "exit_status"},
		{"a port number is not a 429", Failure{Message: "listen tcp :14293: address already in use", ExitCode: 1}, Permanent, "exit_status"},
		{"unknown explicit code falls through to patterns", Failure{Code: "weird", Message: "try again in 5 minutes"}, Transient, "weird"},
		{"a gateway's timeout is the model's, transient", Failure{Code: "gateway_timeout", Message: "upstream timed out"}, Transient, "gateway_timeout"},
		{"gateway_timeout is transient by its code alone", Failure{Code: "gateway_timeout", Message: "upstream gave up", ExitCode: 1}, Transient, "gateway_timeout"},
		{"an executor's timeout code is not the agent's", Failure{Code: "timeout", Message: "upstream request timeout"}, Transient, "timeout"},
		{"a protocol error is transient", Failure{Protocol: fmt.Errorf("garbled line")}, Transient, "protocol_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Classify(c.f)
			if v.Class != c.class || v.Code != c.code {
				t.Errorf("%s/%s, want %s/%s", v.Class, v.Code, c.class, c.code)
			}
			if v.Message == "" {
				t.Error("no message")
			}
		})
	}
	if v := Classify(Failure{Code: "rate_limit", RetryAfter: 20 * time.Second}); v.RetryAfter != 20*time.Second {
		t.Errorf("retry-after lost: %v", v.RetryAfter)
	}
	if v := Classify(Failure{ExitCode: 3}); v.Message != "exit status 3" {
		t.Errorf("message %q", v.Message)
	}
}

func TestHealthSignalOfAFailure(t *testing.T) {
	cases := map[health.Signal]Failure{
		health.StartFailure:      {StartErr: ErrExecutorNotFound},
		health.StdioClosed:       {StdioClose: true},
		health.AttemptTimeout:    {Timeout: TimeoutAttempt},
		health.FirstEventTimeout: {Timeout: TimeoutFirstEvent},
		health.ProtocolError:     {Protocol: fmt.Errorf("bad frame")},
		"":                       {Code: "rate_limit"}, // the provider's trouble, not the executor's
	}
	for want, f := range cases {
		t.Run(string(want), func(t *testing.T) {
			if got := Classify(f).Signal; got != want {
				t.Errorf("%+v: signal %q, want %q", f, got, want)
			}
		})
	}
}

// Each of the agent's own limits names its code and its health signal; an
// executor's timeout code is neither.
func TestTimeoutKind(t *testing.T) {
	cases := []struct {
		kind   TimeoutKind
		name   string
		code   state.ErrorCode
		signal health.Signal
	}{
		{TimeoutNone, "none", "", ""},
		{TimeoutFirstEvent, "first_event", state.CodeFirstEventTimeout, health.FirstEventTimeout},
		{TimeoutAttempt, "attempt", state.CodeAttemptTimeout, health.AttemptTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.kind.String() != c.name || c.kind.Code() != c.code || c.kind.signal() != c.signal {
				t.Errorf("%s: code %q signal %q, want %s %q %q", c.kind, c.kind.Code(), c.kind.signal(), c.name, c.code, c.signal)
			}
			if c.kind == TimeoutNone {
				return
			}
			v := Classify(Failure{Timeout: c.kind})
			if v.Class != Transient || v.Code != c.code || v.Signal != c.signal || v.Message == "" {
				t.Errorf("verdict %+v", v)
			}
		})
	}
}
