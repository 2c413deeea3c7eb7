// Package settings is the agent's settings engine: a table of settings,
// each known by one name everywhere (the flag --NAME, the environment
// variable PREFIX_NAME and the key of a TOML config file), bound to a
// command's flags; the config file read and checked with every mistake
// said with its file and line; the values resolved by one precedence (the
// command line, then the environment, then the config file, then the
// default) with where each came from; and a running program's settings
// read again when its config file changes (Watch).
//
// The engine knows no program's settings: a program declares its own
// Table and binds what each command takes with Table.Bind.
package settings
