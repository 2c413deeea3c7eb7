// Package agentview is how agents are shown to a person: the agents
// enrolled at a control plane (agent agents: the table of agents ls, an
// agent's state as a person reads it, its labels, and the label changes
// agents label reads from its arguments), and this machine's agent read
// from its data directory without its lock: its health record (agent
// health), which tasks run (agent service status, upgrade), and what a
// stop leaves for the next start (agent stop), waiting for it to exit.
// Text an agent said of itself goes through taskview.Visible before it
// reaches a terminal. No commands, no flags.
package agentview
