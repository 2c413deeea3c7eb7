// Package agentsettings holds the agent's and the control plane's settings
// tables (each setting the flag --NAME, the environment variable AGENT_NAME
// or AGENT_CP_NAME, and a key of the config file; package settings is the
// engine that binds, reads, checks and reloads them), and what agent run's
// settings make: the executor's settings, the retry policy, the budget,
// how attempts are confined, the live part a reload applies and the
// agent's configuration.
package agentsettings
