package controlplane

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/state"
)

// events keeps the accepted events of every task, one JSONL file per task
// in dir, each line a StoredEvent, appended and synced before the answer.
// Idempotency keys are rebuilt from these files at start, so a restarted
// control plane still knows every key it accepted.
//
// The events are the record: they are stored before the task file that
// reflects them is saved, and the task file says how many it reflects
// (Task.EventsApplied). A crash between the two is repaired at the next
// start by applying the missing events again (Server.recover); a crash in
// the middle of an append leaves a torn last line, which the next start
// cuts off (repair) before anything is appended after it.
type events struct {
	dir string
}

func (ev events) path(taskID string) string { return filepath.Join(ev.dir, taskID+".jsonl") }

// append writes a task's newly accepted events and syncs them. torn is
// for the fault suite: write half, then crash.
func (ev events) append(taskID string, batch []StoredEvent, torn bool) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range batch {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(ev.path(taskID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	b := buf.Bytes()
	if torn {
		f.Write(b[:len(b)/2])
		f.Sync()
		crash()
	}
	if _, err := f.Write(b); err != nil {
		// Cut what part of the batch got in: the next append must start
		// on a line of its own.
		if info, serr := f.Stat(); serr == nil {
			_ = f.Truncate(info.Size() - int64(len(b))) // best effort; repair at start covers the rest
		}
		return err
	}
	return f.Sync()
}

// list reads a task's accepted events in order.
func (ev events) list(taskID string) ([]StoredEvent, error) {
	f, err := os.Open(ev.path(taskID))
	if errors.Is(err, fs.ErrNotExist) {
		return []StoredEvent{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := []StoredEvent{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 2*MaxBatchBytes)
	for sc.Scan() {
		var e StoredEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Key != "" {
			out = append(out, e)
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		// A line longer than any batch (written before keys were capped):
		// what came before it is kept; a start must not fail on it.
		return out, nil
	}
	return out, sc.Err()
}

// repair cuts a torn last line (a crash in the middle of an append) off a
// task's events file and syncs the cut. It reports how many bytes it cut.
func (ev events) repair(taskID string) (int64, error) {
	path := ev.path(taskID)
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 || b[len(b)-1] == '\n' {
		return 0, err
	}
	keep := int64(bytes.LastIndexByte(b, '\n') + 1)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Truncate(keep); err != nil {
		return 0, err
	}
	return int64(len(b)) - keep, durable.Datasync(f)
}

// load repairs every events file and returns each task's events.
func (ev events) load() (map[string][]StoredEvent, error) {
	entries, err := os.ReadDir(ev.dir)
	if err != nil {
		return nil, err
	}
	all := map[string][]StoredEvent{}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := ev.repair(id); err != nil {
			return nil, fmt.Errorf("repair events of %s: %w", id, err)
		}
		list, err := ev.list(id)
		if err != nil {
			return nil, fmt.Errorf("events of %s: %w", id, err)
		}
		all[id] = list
	}
	return all, nil
}

// newID returns prefix and random hex.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// agentState is what the control plane knows of an agent.
type agentState struct {
	view AgentView
	// missing counts, per task leased to the agent in phase claimed, the
	// heartbeats in a row that did not list it.
	missing map[string]int
}

func (a *agentState) online(now time.Time, interval time.Duration) bool {
	return a.view.State != AgentOffline && now.Sub(a.view.LastHeartbeat) <= 3*interval
}

// loadTasks reads every task, skipping (and reporting) bad files.
func loadTasks(st *state.Store) (map[string]*state.Task, error) {
	list, err := st.LoadAll()
	tasks := make(map[string]*state.Task, len(list))
	for _, t := range list {
		tasks[t.ID] = t
	}
	return tasks, err
}

// Crash points, for the fault suite: AGENT_CP_CRASH=POINT:WHEN makes the
// control plane kill itself with SIGKILL at POINT during an events batch:
// WHEN is the batch's number (1 is the first), or "complete" for the first
// batch that holds a completion. It proves that a crash there loses
// nothing the control plane accepted.
const (
	crashMidEvents   = "mid-events"   // half of a batch's events written
	crashAfterEvents = "after-events" // events stored, task files not saved
	crashAfterSave   = "after-save"   // task files saved, the answer not sent
)

// crashSpec is AGENT_CP_CRASH, read once.
var crashSpec = os.Getenv("AGENT_CP_CRASH")

// crashBatch is the events batch a crash point may fire in.
type crashBatch struct {
	n        int  // its number
	complete bool // it holds a completion
}

// at reports whether the process should crash at point during b.
func (b crashBatch) at(point string) bool {
	if crashSpec == "" {
		return false
	}
	name, when, _ := strings.Cut(crashSpec, ":")
	return name == point && (when == fmt.Sprint(b.n) || when == "complete" && b.complete)
}

// crash ends the process as a power cut would, without any clean-up.
func crash() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
