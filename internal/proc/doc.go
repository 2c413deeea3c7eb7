// Package proc starts an attempt's executor process and makes sure no
// process of the attempt outlives it.
//
// Start runs a command in a process group of its own, with the attempt's
// mark (MarkEnv) in its environment and its output on pipes of its own; on
// Linux it runs under a keeper (internal/keeper), which confines it and
// ends every process it starts. Process.Signal stops it; Process.Sweep,
// once it has exited, kills whatever is left: its group, every process
// anywhere that carries its mark, and what a keeper that died left to the
// agent. SweepOwner does the same for what a previous life of the agent
// left running, and BecomeSubreaper keeps orphans of attempts within the
// agent's reach.
//
// LineReader reads a child's output a line at a time in bounded memory.
package proc
