package controlplane

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeagent/agent/state"
)

// events keeps the accepted events of every task, one JSONL file per task
// in dir, each line a StoredEvent, appended and synced before the answer.
// Idempotency keys are rebuilt from these files at start, so a restarted
// control plane still knows every key it accepted.
type events struct {
	dir string
}

func (ev events) path(taskID string) string { return filepath.Join(ev.dir, taskID+".jsonl") }

// append writes a task's newly accepted events and syncs them.
func (ev events) append(taskID string, batch []StoredEvent) error {
	f, err := os.OpenFile(ev.path(taskID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, e := range batch {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Sync()
}

// list reads a task's accepted events in order. A line cut short by a
// crash is skipped.
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
	return out, sc.Err()
}

// keys rebuilds the set of accepted keys from every events file.
func (ev events) keys() (map[string]bool, error) {
	keys := map[string]bool{}
	entries, err := os.ReadDir(ev.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok {
			continue
		}
		list, err := ev.list(id)
		if err != nil {
			return nil, fmt.Errorf("events of %s: %w", id, err)
		}
		for _, s := range list {
			keys[s.Key] = true
		}
	}
	return keys, nil
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
}

func (a *agentState) online(now time.Time, interval time.Duration) bool {
	return now.Sub(a.view.LastHeartbeat) <= 3*interval
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
