// Package mockmodel is a model API on loopback for tests and the demo. One
// HTTP server on 127.0.0.1 speaks
//
//   - the OpenAI Responses API, POST /v1/responses, streamed over SSE, as
//     Codex uses it (wire_api = "responses"; base URL OpenAIBaseURL);
//   - the Anthropic Messages API, POST /v1/messages (Claude Code adds
//     ?beta=true), streamed over SSE or, for stream:false, as one JSON
//     message; and HEAD / and HEAD /api/hello, Claude Code's reachability
//     checks (base URL URL), as Claude Code and OpenCode's anthropic
//     provider use it;
//   - the Gemini API, POST /v1beta/models/MODEL:streamGenerateContent
//     (?alt=sse, data-only events) and :generateContent (one JSON
//     answer), as Gemini CLI uses it (base URL URL).
//
// The events and error bodies are shaped like the real APIs', closely
// enough that the real Codex and Claude Code CLIs accept them: the tests
// beside this package prove it against the pinned binaries.
//
// # Choosing the answer
//
// The prompt says how the mock answers, in lines of the user's text (the
// last line of each kind, in the last user message that has one, wins;
// only user messages after the model's last text answer count, so that a
// follow-up sent to a continued session is a turn of its own):
//
//	mock: SCENARIO                 every model gets SCENARIO
//	mock: gpt-a=r429 gpt-b=text    per model: a fallback chain fails on gpt-a, succeeds on gpt-b
//	mock: r500 gpt-b=text          a bare name is the default for models not named
//	mock: shell after=r500         the turn after the tool ran gets r500, not the final text
//	mock-cmd: COMMAND              the command shell runs (default DefaultCommand)
//	mock-file: PATH                the file write creates or edit changes (default
//	                               PatchFile for Codex, WriteFile for Claude Code;
//	                               relative to the CLI's cwd)
//
// No "mock:" line means text. A scenario the mock does not know is
// answered with HTTP 400 naming it, so a typo fails loudly.
//
// A request that carries a tool result (OpenAI function_call_output or
// custom_tool_call_output after the last user message; Anthropic
// tool_result in the last user message) is the model turn after a tool
// ran: it gets final, FinalText, unless after=NAME says otherwise. So a
// tool scenario takes two requests, as with a real model.
//
// # Scenarios
//
//	text          HelloText, streamed in a few deltas
//	shell         a shell call running the mock-cmd line: Codex's exec_command
//	              {"cmd": ...}, Claude Code's Bash {"command": ...}, OpenCode's
//	              bash, Gemini CLI's run_shell_command
//	write         Codex: the freeform apply_patch tool adding a file;
//	              Claude Code: Write of a file in the cwd its prompt states
//	              (OpenCode: write; Gemini CLI: write_file, in the workspace
//	              directory its first message states)
//	edit          the file (mock-file:, default PatchFile for Codex, WriteFile
//	              for Claude Code) holding WrittenContent is changed to hold
//	              EditedContent: Codex's apply_patch updating it, Claude
//	              Code's Edit (old_string, new_string)
//	escalate      Codex: exec_command with sandbox_permissions "require_escalated"
//	              and a justification, which makes Codex ask for approval under
//	              approval policy on-request; Claude Code: the same as shell
//	r429          429 with Retry-After: 1 (OpenAI rate_limit_exceeded,
//	              Anthropic rate_limit_error)
//	usage_limit   the account's usage limit, reached from the first such
//	              request until Server.UsageLimitReset (3 s) after it, then
//	              answered as text: OpenAI 429 usage_limit_reached with
//	              resets_at and the x-codex-primary-* headers, as ChatGPT's
//	              backend answers Codex; Anthropic 429 rate_limit_error with
//	              retry-after and the anthropic-ratelimit-unified-* headers
//	quota         OpenAI 429 insufficient_quota; Anthropic 400 "Your credit
//	              balance is too low" (what Claude Code calls billing_error)
//	r401, r403    authentication and permission errors
//	r500          500 (OpenAI server_error, Anthropic api_error)
//	overloaded    OpenAI 503 server_is_overloaded; Anthropic 529 overloaded_error
//	context       OpenAI: 200, then SSE response.failed context_length_exceeded;
//	              Anthropic: 400 "prompt is too long"
//	cut           the stream starts, a few deltas, and 200 ms later the
//	              connection closes (the body is delimited by the connection:
//	              the client reads an end with no response.completed or
//	              message_stop); Anthropic stream:false gets the text, so
//	              Claude Code's fallback after a broken stream succeeds
//	hang          headers and the first event, then silence until the client
//	              goes away or the mock closes
//	hang_headers  nothing at all, not even a status line, until then
//	final         FinalText (what a tool result gets)
//
// A tool scenario checks that the request offers the tool it calls and
// answers 400 if not: a CLI version that renames a tool fails clearly.
//
// Every model request is recorded (Requests): the API, the model asked
// for, the scenario applied, whether it carried a tool result, whether it
// streamed, and the texts of its conversation (the user's and the model's
// earlier answers, in order), so that a test sees what a continued
// session carried. Close ends hanging requests at once and waits for every
// handler, so tests leak no goroutine.
package mockmodel
