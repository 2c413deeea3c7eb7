// Package keeper runs each attempt's executor under a keeper: a small
// process of the agent's own binary that starts the executor, confines it,
// and ends every process the attempt started, whatever they did to get
// away.
//
// Why a process of its own: a process of the attempt can leave its process
// group, start a session of its own and drop the environment mark the agent
// knows its attempts by. It cannot leave its ancestry. The keeper is a
// child subreaper (PR_SET_CHILD_SUBREAPER), so everything the executor
// starts that loses its parent becomes the keeper's child, not init's. When
// the executor exits, the keeper kills what is left of the attempt (its
// process group, and every child it inherited, until it has none) and only
// then exits itself. The keeper also confines the executor and all it
// starts with Landlock (internal/landlock), from the thread that starts it.
//
// Where an attempt's network is confined (internal/egress), its executor
// runs in a network namespace of its own, with nothing but loopback; the
// keeper, outside it, serves the attempt's proxy and forwards on
// listeners made inside it, and dials out for it. The executor then
// starts through a stage (see stage_linux.go), which is also how an
// attempt of a root agent gives up root's capabilities, and how it runs
// as another user (--task-user).
//
// The agent talks to its keeper over a socket (file descriptor 3 in the
// keeper), one JSON object a line:
//
//	agent → keeper  {"spec": {...}}                      first: what to run
//	keeper → agent  {"started": PID, "abi": 7}           or {"error": "...", "errno": 2}
//	agent → keeper  {"signal": 15, "group": true}        signal the executor's group, or the executor alone
//	keeper → agent  {"exit": {"exit_code": 0, "signal": "", "swept": 1, "egress": {"count": 2, "last": ["evil.example:443"]}}}
//	                last, after every process of the attempt is gone; egress
//	                counts and names what the attempt's proxy refused
//
// The agent going away (its end of the socket closed: it was killed) ends
// the attempt: SIGTERM to the executor's group, then SIGKILL to all after
// the grace period. SIGTERM to the keeper ends it at once.
//
// A program that starts attempts calls Main first thing in main (and in
// TestMain): in a process started as a keeper, Main runs the keeper and
// never returns.
package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/landlock"
)

// Arg0 is the keeper's argv[0], which tells Main to run as one. The
// executor's own argv follows it, so that ps shows what the keeper keeps.
const Arg0 = "agent-keeper"

// attempt is what a keeper runs: the executor, its environment and how it is confined.
type attempt struct {
	// Path is the executor's binary, resolved; Args its argv (Args[0] is
	// its name as configured).
	Path string   `json:"path"`
	Args []string `json:"args"`
	Dir  string   `json:"dir,omitempty"`
	Env  []string `json:"env"`
	// Policy, if set, confines the executor and everything it starts.
	Policy *landlock.Policy `json:"policy,omitempty"`
	// Egress, if set, is where the attempt may connect: it runs in a
	// network namespace of its own. Nil: the host's network.
	Egress *egress.Policy `json:"egress,omitempty"`
	// User, if set, is who the executor runs as (a root agent only).
	User *User `json:"user,omitempty"`
	// Grace is how long the executor has between SIGTERM and SIGKILL when
	// the agent goes away.
	Grace time.Duration `json:"grace"`
	// Spool, if set, is the attempt's spool directory: the keeper owns the
	// executor's standard streams and the attempt outlives its agent for
	// Reattach (see spool_linux.go). Stdin is written to the executor's
	// stdin first; KeepStdin leaves it open for the agent's writes.
	Spool     string        `json:"spool,omitempty"`
	Reattach  time.Duration `json:"reattach,omitempty"`
	Stdin     []byte        `json:"stdin,omitempty"`
	KeepStdin bool          `json:"keep_stdin,omitempty"`
}

// Status is how the executor ended, and how many processes the keeper had
// to kill after it.
type Status struct {
	// ExitCode is the executor's exit code; -1 when a signal ended it.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended it, if one did.
	Signal string `json:"signal,omitempty"`
	// Swept counts the attempt's processes still alive when the executor
	// exited, which the keeper killed.
	Swept int `json:"swept"`
	// Egress is what the attempt's proxy refused, when its network was
	// confined.
	Egress *egress.Denied `json:"egress,omitempty"`
}

// Sandbox is how an attempt is confined.
type Sandbox struct {
	// Files, if set, is what its processes may read and write.
	Files *landlock.Policy
	// Egress, if set, is where they may connect; nil leaves them the
	// host's network.
	Egress *egress.Policy
	// User, if set, is who they run as: a keeper running as root only.
	User *User
}

// User is a user an attempt runs as: its ids and supplementary groups.
type User struct {
	Uid    uint32   `json:"uid"`
	Gid    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// message is one line on the keeper's socket.
type message struct {
	Attempt *attempt `json:"spec,omitempty"`

	Started int    `json:"started,omitempty"`
	ABI     int    `json:"abi,omitempty"`
	Error   string `json:"error,omitempty"`
	Errno   int    `json:"errno,omitempty"`

	Signal int  `json:"signal,omitempty"`
	Group  bool `json:"group,omitempty"`

	Exit *Status `json:"exit,omitempty"`

	// Spool mode (see spool_linux.go).
	Spooled    *Spooled        `json:"spooled,omitempty"`
	Hello      *Hello          `json:"hello,omitempty"`
	Input      *input          `json:"stdin,omitempty"`
	CloseInput bool            `json:"close_stdin,omitempty"`
	Commit     json.RawMessage `json:"commit,omitempty"`
	Read       *Spooled        `json:"read,omitempty"` // with a commit: how far it has read each stream
	Release    bool            `json:"release,omitempty"`
}

// SocketName is the keeper's socket in the spool directory; StdoutName and
// StderrName are the spool files.
const (
	SocketName = "keeper.sock"
	StdoutName = "stdout"
	StderrName = "stderr"
)

// Spooled says how much of each of the executor's output streams its
// spool holds, and whether the stream has ended.
type Spooled struct {
	Stdout    int64 `json:"stdout"`
	Stderr    int64 `json:"stderr"`
	StdoutEOF bool  `json:"stdout_eof,omitempty"`
	StderrEOF bool  `json:"stderr_eof,omitempty"`
}

// Hello is what a keeper tells an agent that attaches to it: the
// executor it keeps, the last commit an agent left with it, and the
// executor's end once it has ended.
type Hello struct {
	// Pid is the executor's; Keeper the keeper's own.
	Pid    int `json:"pid"`
	Keeper int `json:"keeper"`
	ABI    int `json:"abi,omitempty"`
	// Commit is the last commit an agent sent, as it sent it.
	Commit  json.RawMessage `json:"commit,omitempty"`
	Spooled Spooled         `json:"spooled"`
	Exit    *Status         `json:"exit,omitempty"`
}

// input is data for the executor's stdin. A keeper writes each ID once:
// an agent that re-attaches and sends again what its previous life
// already sent has it dropped.
type input struct {
	ID   string `json:"id,omitempty"`
	Data []byte `json:"data"`
}

// StartError is an executor the keeper could not start. It wraps the
// system error (fs.ErrNotExist, fs.ErrPermission, ENOEXEC) where there
// was one, so errors.Is tells why.
type StartError struct {
	Msg   string
	Errno syscall.Errno
}

func (e *StartError) Error() string { return e.Msg }

// Unwrap gives the system error.
func (e *StartError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// ErrNotKeeper is returned by Start in a program that did not call Main:
// it cannot serve as its own keeper.
var ErrNotKeeper = errors.New("keeper: this program cannot keep attempts (its main does not call keeper.Main)")

func errorf(format string, args ...any) error { return fmt.Errorf("keeper: "+format, args...) }
