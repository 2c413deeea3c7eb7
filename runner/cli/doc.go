// Package cli holds what the executors that drive an AI coding CLI (codex,
// claude, opencode, acp) share: the base of their configuration (Base), the emitter that
// holds a CLI's events until it names its session and says where it keeps
// it (SessionEmitter), how a CLI's process ended and its HTTP statuses in
// words the runner knows (ExitText, HTTPStatusCode), where a CLI keeps its
// state (EnvValue, HomeDir), and the probe of a CLI's version against the releases the
// executors are tested with (Version, Tested).
//
// It knows no CLI: each executor package knows its own and implements
// Versioned.
package cli
