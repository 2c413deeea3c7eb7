package filestore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
)

// registry holds the agents' token hashes, in memory and in two files:
//
//   - agents.log: one JSON line per register or revoke since the last
//     compaction, appended and synced before the call returns, so a
//     registration costs the same at 10 agents and at 10,000;
//   - agents.json: every agent's token hash (id → hash) as of the last
//     compaction, replaced whole (natefinch/atomic, then the directory
//     synced). Control planes before the log kept only this file: it is
//     read as such.
//
// Open reads agents.json, then applies the log over it (a torn last line,
// a crash in the middle of an append, is ignored and cut off). When the
// log has grown past twice the live entries, open compacts: agents.json
// is written anew, then the log emptied. Close compacts too, so a clean
// stop leaves every hash in agents.json. A crash in the middle of a
// compaction loses nothing: the log applied again over a newer
// agents.json gives the same hashes.
//
// The control plane keeps the tokens' SHA-256, never the tokens.
type registry struct {
	path    string // agents.json
	logPath string // agents.log
	log     *slog.Logger

	mu      sync.Mutex
	byHash  map[string]string // token hash → agent id
	byID    map[string]string // agent id → token hash
	file    *os.File          // agents.log, open to append
	size    int64             // its size
	entries int               // its lines
}

// logEntry is a line of agents.log: a register (Hash set) or a revoke.
type logEntry struct {
	ID     string `json:"id"`
	Hash   string `json:"hash,omitempty"`
	Revoke bool   `json:"revoke,omitempty"`
}

func openRegistry(dir string, log *slog.Logger) (*registry, error) {
	r := &registry{path: filepath.Join(dir, "agents.json"), logPath: filepath.Join(dir, "agents.log"), log: log,
		byHash: map[string]string{}, byID: map[string]string{}}
	b, err := os.ReadFile(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &r.byID); err != nil {
			return nil, fmt.Errorf("%s: %w", r.path, err)
		}
		if r.byID == nil { // a file of "null"
			r.byID = map[string]string{}
		}
	}
	if err := r.readLog(); err != nil {
		return nil, err
	}
	for id, h := range r.byID {
		r.byHash[h] = id
	}
	if r.entries > 2*len(r.byID) {
		if err := r.compact(); err != nil {
			r.file.Close()
			return nil, err
		}
	}
	return r, nil
}

// readLog applies agents.log over byID, cuts a torn last line off it,
// and opens it to append (creating it, 0600).
func (r *registry) readLog() error {
	f, err := os.OpenFile(r.logPath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	br := bufio.NewReader(f)
	var whole int64 // the bytes of whole lines
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a last line without its newline is torn: ignored
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", r.logPath, err)
		}
		whole += int64(len(line))
		r.entries++
		var e logEntry
		if err := json.Unmarshal(bytes.TrimSpace(line), &e); err != nil || e.ID == "" {
			r.log.Error("a line of the agents' log could not be read; it is skipped", "file", r.logPath, "offset", whole-int64(len(line)))
			continue
		}
		r.apply(e)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if info.Size() > whole {
		if err := f.Truncate(whole); err != nil {
			f.Close()
			return fmt.Errorf("%s: cut its torn last line: %w", r.logPath, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := durable.SyncDir(filepath.Dir(r.logPath)); err != nil { // it may be new
		f.Close()
		return err
	}
	r.file, r.size = f, whole
	return nil
}

// apply applies a log entry to byID (byHash is made from it after).
func (r *registry) apply(e logEntry) {
	if e.Revoke {
		delete(r.byID, e.ID)
	} else {
		r.byID[e.ID] = e.Hash
	}
}

// append writes an entry to the log and syncs it. mu is held. A write
// that fails part-way is cut off, so the next entry starts a line.
func (r *registry) append(e logEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := r.file.Write(b); err != nil {
		_ = r.file.Truncate(r.size) // best effort: open ignores a torn line anyway
		return fmt.Errorf("%s: %w", r.logPath, err)
	}
	if err := durable.Datasync(r.file); err != nil {
		return fmt.Errorf("%s: %w", r.logPath, err)
	}
	r.size += int64(len(b))
	r.entries++
	return nil
}

// compact writes every hash to agents.json (0600, synced, the directory
// too), then empties the log. mu is held, or nobody else has r.
func (r *registry) compact() error {
	data, err := json.MarshalIndent(r.byID, "", "  ")
	if err != nil {
		return err
	}
	if err := atomic.WriteFile(r.path, bytes.NewReader(data)); err != nil {
		return err
	}
	if err := os.Chmod(r.path, 0o600); err != nil {
		return err
	}
	if err := durable.SyncDir(filepath.Dir(r.path)); err != nil {
		return err
	}
	if err := r.file.Truncate(0); err != nil {
		return fmt.Errorf("%s: %w", r.logPath, err)
	}
	if err := r.file.Sync(); err != nil {
		return fmt.Errorf("%s: %w", r.logPath, err)
	}
	r.size, r.entries = 0, 0
	return nil
}

// close compacts the log into agents.json, when it holds anything, and
// closes it.
func (r *registry) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		return nil
	}
	var err error
	if r.entries > 0 {
		err = r.compact()
	}
	err = errors.Join(err, r.file.Close())
	r.file = nil
	return err
}

// register records agent id's token hash. Unless replace is set, an id
// that already has one is store.ErrRegistered.
func (r *registry) register(id, hash string, replace bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.byID[id]
	if ok && !replace {
		return store.ErrRegistered
	}
	if err := r.append(logEntry{ID: id, Hash: hash}); err != nil {
		return err
	}
	if ok {
		delete(r.byHash, old)
	}
	r.byID[id], r.byHash[hash] = hash, id
	return nil
}

// revoke forgets agent id's token hash; it reports whether there was one.
func (r *registry) revoke(id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.byID[id]
	if !ok {
		return false, nil
	}
	if err := r.append(logEntry{ID: id, Revoke: true}); err != nil {
		return false, err
	}
	delete(r.byID, id)
	delete(r.byHash, h)
	return true, nil
}

// agent returns the agent a token hash belongs to, "" when none.
func (r *registry) agent(hash string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byHash[hash]
}
