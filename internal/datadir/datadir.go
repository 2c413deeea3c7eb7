// Package datadir is the agent's data directory: where each file is
// (Layout), and reading and writing the files that the daemon writes and
// the command line reads: task state, attempt logs, the health file, the
// pid file, the agent's id and token. It promises that a reader changes
// nothing and creates no directory where a mistyped path points, that
// every write is atomic and durable (0600), and that a symbolic link in
// place of a file the agent trusts is refused.
//
// It is internal: the data directory's files are the agent's own; what
// others may rely on is what the command line prints from them.
package datadir

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/internal/private"
	"github.com/edgeagent/agent/state"
	"github.com/natefinch/atomic"
)

// Layout is where the agent keeps its files in a data directory:
//
//	outbox/           the durable outbox (its lock is the data directory's)
//	tasks/            task state, one JSON file per task
//	logs/TASK/N.log   executor output of attempt N
//	health.json       the executor's health at the last heartbeat
//	agent-id          the agent's stable id
//	agent-token       the agent's own control plane token (0600)
//	agent.pid         the running agent's process id
//	spool/ATTEMPT/    an attempt's spool, while it may outlive the agent
type Layout struct{ Dir string }

// Paths in a data directory.
func (l Layout) Outbox() string            { return filepath.Join(l.Dir, "outbox") }
func (l Layout) Tasks() string             { return filepath.Join(l.Dir, "tasks") }
func (l Layout) Logs(taskID string) string { return filepath.Join(l.Dir, "logs", taskID) }
func (l Layout) Health() string            { return filepath.Join(l.Dir, "health.json") }
func (l Layout) AgentID() string           { return filepath.Join(l.Dir, "agent-id") }
func (l Layout) AgentToken() string        { return filepath.Join(l.Dir, "agent-token") }
func (l Layout) Spool() string             { return filepath.Join(l.Dir, "spool") }
func (l Layout) Log(taskID string, n int) string {
	return filepath.Join(l.Logs(taskID), strconv.Itoa(n)+".log")
}

// ReadAgentToken is the agent's own control plane token, "" when none is
// kept (or the file is not a regular file).
func (l Layout) ReadAgentToken() string {
	saved, _ := readNoFollow(l.AgentToken())
	return strings.TrimSpace(string(saved))
}

// SaveAgentToken keeps the agent's own control plane token, 0600.
func (l Layout) SaveAgentToken(tok string) error {
	return WriteFile(l.AgentToken(), []byte(tok+"\n"))
}

// readNoFollow reads a file, refusing a symbolic link in its place.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(f)
}

// CheckPrivate refuses a data directory that someone else could change: one
// writable by its group or others, or owned by another user. What is in it
// decides what the agent sends and runs.
func CheckPrivate(dir string) error { return private.Dir("data directory", dir) }

// LoadAgentID returns the id kept in the data directory, making one the
// first time: the host name and a random suffix.
func (l Layout) LoadAgentID() (string, error) {
	b, err := readNoFollow(l.AgentID())
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	host, _ := os.Hostname()
	suffix := make([]byte, 3)
	rand.Read(suffix)
	id := fmt.Sprintf("%s-%s", sanitize(host), hex.EncodeToString(suffix))
	if err := WriteFile(l.AgentID(), []byte(id+"\n")); err != nil {
		return "", err
	}
	return id, nil
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
	if s == "" {
		return "agent"
	}
	return s
}

// WriteFile replaces a file atomically and durably, 0600.
func WriteFile(path string, data []byte) error {
	if err := atomic.WriteFile(path, bytes.NewReader(data)); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// HealthFile is what health.json holds: `agent health` reads it.
type HealthFile struct {
	health.Snapshot
	AgentID   string    `json:"agent_id"`
	UpdatedAt time.Time `json:"updated_at"`
	// ControlPlane says whether the last heartbeat got through.
	ControlPlane string `json:"control_plane"`
	// Storage says whether the agent's writes fail (a full disk) and what
	// it holds in memory meanwhile.
	Storage StorageStatus `json:"storage"`
	// Workspaces is what the tasks' git worktrees take, as the agent's
	// last prune found; nil before one, or in files of earlier versions.
	Workspaces *WorkspaceUsage `json:"workspaces,omitempty"`
	// PublicURL is where people reach the control plane's console, as
	// its last heartbeat answer said; "" when it did not.
	PublicURL string `json:"public_url,omitempty"`
	// Starts is the start queue (--max-starts): the attempts starting,
	// those waiting for a start, and how many may start at once. Zero in
	// files of earlier versions.
	Starts StartQueue `json:"starts,omitzero"`
}

// StartQueue is the agent's start queue as health.json keeps it.
type StartQueue struct {
	Starting int `json:"starting"`
	Queued   int `json:"queued"`
	Max      int `json:"max"`
}

// WorkspaceUsage is what the tasks' git worktrees take on disk: how many
// there are, how many are kept because removing them would lose work,
// and their bytes.
type WorkspaceUsage struct {
	Count int       `json:"count"`
	Kept  int       `json:"kept"`
	Bytes int64     `json:"bytes"`
	At    time.Time `json:"at"`
}

// StorageStatus is what the agent tells of its writes.
type StorageStatus struct {
	Failing     string    `json:"failing,omitempty"` // disk_full or storage_error, and the error
	Since       time.Time `json:"since,omitzero"`
	HeldReports int       `json:"held_reports"`
	HeldTasks   int       `json:"held_tasks"`
	DroppedLogs int       `json:"dropped_logs"`
}

// WriteHealth records the agent's health, for `agent health` to read.
func (l Layout) WriteHealth(h HealthFile) error {
	b, _ := json.MarshalIndent(h, "", "  ")
	return WriteFile(l.Health(), append(b, '\n'))
}

// ReadHealth reads the health the agent recorded at its last heartbeat.
func ReadHealth(dataDir string) (HealthFile, error) {
	var h HealthFile
	b, err := os.ReadFile(Layout{dataDir}.Health())
	if errors.Is(err, fs.ErrNotExist) {
		return h, fmt.Errorf("no health recorded in %s: the agent has not run there yet", dataDir)
	}
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%s: %w", Layout{dataDir}.Health(), err)
	}
	return h, nil
}

// AppendLog appends lines of executor output, formatted and capped by the
// daemon, to the task's attempt log. These files are for local
// inspection; delivery goes through the outbox.
func (l Layout) AppendLog(taskID string, attempt int, b []byte) error {
	if err := os.MkdirAll(l.Logs(taskID), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(l.Log(taskID, attempt), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// logAttempts lists the attempt numbers that have a log, in order.
func logAttempts(dataDir, taskID string) ([]int, error) {
	if err := state.ValidateID(taskID); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(Layout{dataDir}.Logs(taskID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// LoadTasks reads the task state of a data directory, without changing
// it. Unreadable files are reported in err; the other tasks are returned.
func LoadTasks(dataDir string) ([]*state.Task, error) {
	st, err := readStore(dataDir)
	if err != nil {
		return nil, err
	}
	return st.LoadAll()
}

// LoadTask reads one task of a data directory, without changing it.
func LoadTask(dataDir, id string) (*state.Task, error) {
	if err := state.ValidateID(id); err != nil {
		return nil, err
	}
	st, err := readStore(dataDir)
	if err != nil {
		return nil, err
	}
	t, err := st.Load(id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noTaskError(fmt.Sprintf("no task %s in data directory %s", id, dataDir))
	}
	return t, err
}

// noTaskError is LoadTask's error for a task the data directory does not
// hold: errors.Is(err, fs.ErrNotExist).
type noTaskError string

func (e noTaskError) Error() string { return string(e) }
func (e noTaskError) Unwrap() error { return fs.ErrNotExist }

// CheckTaskEnded refuses a task of the data directory that has not
// ended: what it works in is in use. A data directory without task
// state, or without the task, has nothing of it in use.
func CheckTaskEnded(dataDir, id string) error {
	if CheckTaskState(dataDir) != nil {
		return nil
	}
	t, err := LoadTask(dataDir, id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !t.Phase.Terminal():
		return fmt.Errorf("task %s is %s, not finished: its workspace is in use", id, t.Phase)
	}
	return nil
}

// CheckTaskState reports a data directory that holds no task state (the
// agent never ran there, or the path is mistyped).
func CheckTaskState(dataDir string) error {
	if info, err := os.Stat(Layout{dataDir}.Tasks()); err != nil || !info.IsDir() {
		return fmt.Errorf("no task state in data directory %s (has the agent run there?)", dataDir)
	}
	return nil
}

// readStore opens the task store of a data directory only if it is there:
// a reader must not create directories where a mistyped path points.
func readStore(dataDir string) (*state.Store, error) {
	if err := CheckTaskState(dataDir); err != nil {
		return nil, err
	}
	return state.OpenStore(Layout{dataDir}.Tasks())
}

// LogReader reads a task's attempt logs from where it last stopped, so
// that a caller can follow them as they grow.
type LogReader struct {
	dataDir, taskID string
	only            int // 0: every attempt
	offsets         map[int]int64
	lastShown       int
}

// NewLogReader reads task's logs, of one attempt when attempt > 0.
func NewLogReader(dataDir, taskID string, attempt int) (*LogReader, error) {
	if err := state.ValidateID(taskID); err != nil {
		return nil, err
	}
	return &LogReader{dataDir: dataDir, taskID: taskID, only: attempt, offsets: map[int]int64{}}, nil
}

// Dir is the directory holding the task's logs.
func (r *LogReader) Dir() string { return Layout{r.dataDir}.Logs(r.taskID) }

// LogLine is one line of an attempt's log as the agent writes it (without
// its newline): the time (LogTime), the stream, the text. tasks logs
// --remote prints the control plane's events the same way.
func LogLine(ts, stream, text string) string {
	return fmt.Sprintf("%s %-8s %s", ts, stream, text)
}

// LogTime is a log line's time: UTC, to the millisecond.
func LogTime(at time.Time) string { return at.UTC().Format("15:04:05.000") }

// Next calls fn with the complete lines written since the last call. A
// header line "== attempt N ==" comes before the lines of each attempt
// when several are shown.
func (r *LogReader) Next(fn func(line string)) error {
	attempts, err := logAttempts(r.dataDir, r.taskID)
	if err != nil {
		return err
	}
	for _, n := range attempts {
		if r.only > 0 && n != r.only {
			continue
		}
		f, err := os.Open(Layout{r.dataDir}.Log(r.taskID, n))
		if err != nil {
			return err
		}
		if _, err := f.Seek(r.offsets[n], 0); err != nil {
			f.Close()
			return err
		}
		br := bufio.NewReader(f)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break // an unterminated line waits for the next call
			}
			r.offsets[n] += int64(len(line))
			if r.only == 0 && r.lastShown != n {
				fn(fmt.Sprintf("== attempt %d ==", n))
				r.lastShown = n
			}
			fn(strings.TrimSuffix(line, "\n"))
		}
		f.Close()
	}
	return nil
}
