// Package mockmodel is a model API on loopback for tests and the demo: it
// speaks the OpenAI Responses API (POST /v1/responses, as Codex uses it)
// and the Anthropic Messages API (POST /v1/messages, as Claude Code uses
// it), both streaming over SSE, and answers each request by a scenario
// named in the prompt.
//
// A line of the prompt (the last user text that has one wins)
//
//	mock: SCENARIO
//
// applies to every request; pairs pick per model, so that a fallback chain
// can fail on one model and succeed on the next:
//
//	mock: gpt-a=r429 gpt-b=text
//
// A request that carries a tool result (the second model turn of a tool
// scenario) gets the final text, or the scenario named by "after=NAME" on
// the mock line (mock: shell after=r500: a command runs, then the model
// fails). The scenarios:
//
//	text          "Hello from the mock model.", streamed in a few deltas
//	shell         a shell tool call (Codex exec_command, Claude Bash) running
//	              the prompt's "mock-cmd: COMMAND" line (default: echo
//	              mock-side-effect > mock_side_effect.txt)
//	write         a file write (Codex apply_patch adding mock_patch.txt,
//	              Claude Write of mock_write.txt in the request's cwd)
//	escalate      Codex: exec_command asking for escalated permissions,
//	              which makes Codex ask for approval under on-request
//	r429          429 with Retry-After: 1
//	quota         OpenAI 429 insufficient_quota; Anthropic 400 billing
//	r401, r403, r500
//	overloaded    OpenAI 503 server_is_overloaded; Anthropic 529
//	context       OpenAI response.failed context_length_exceeded;
//	              Anthropic 400 "prompt is too long"
//	cut           some deltas, then the connection closes
//	hang          headers and a first event, then silence
//	hang_headers  nothing at all, not even a status line
//
// Every request is recorded (Requests): the API, the model asked for, the
// scenario applied. Close ends hanging requests at once.
package mockmodel
