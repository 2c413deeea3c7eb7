// Package controlplane is the client of the control plane API (package
// api holds the wire types) and the reference control plane server
// (`agent controlplane serve`).
//
// The reference server is bounded against one task or client: titles and
// prompts are capped (api.MaxTitleRunes, api.MaxPromptBytes), the log
// output it stores per attempt too (ServerOptions.MaxAttemptOutput; past it
// lines are counted and one event marks the cut), the lists come in pages
// written a piece at a time (api.MaxTasksPage, api.MaxEventsPage,
// api.NextAfterHeader), events stay on disk, and the idempotency keys of
// ended tasks leave memory.
package controlplane
