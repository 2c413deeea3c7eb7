package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/durable"
	"github.com/natefinch/atomic"
)

// SchemaVersion is the version of the task files Store writes. Files
// without a version are the older format, normalized on load.
const SchemaVersion = 1

// ErrBadID: a task id that cannot safely become a file name.
var ErrBadID = errors.New("invalid task id")

// ValidateID accepts 1 to 128 letters, digits, '.', '_' and '-', starting
// with a letter or digit: never a path separator, never "..".
func ValidateID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w %q: want 1 to 128 characters", ErrBadID, id)
	}
	for i, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '.' || c == '_' || c == '-'))
		if !ok {
			return fmt.Errorf("%w %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", ErrBadID, id)
		}
	}
	return nil
}

// Store keeps one JSON file per task in a directory. Each file is replaced
// atomically (a synced temporary file renamed over it, then the directory
// synced), so a crash leaves either the old task or the new one.
type Store struct {
	dir string
}

// OpenStore opens (creating, 0700) the store in dir.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path is the file of task id.
func (s *Store) Path(id string) string { return filepath.Join(s.dir, id+".json") }

// file is the on-disk form: the task with the schema version beside it.
type file struct {
	SchemaVersion int `json:"schema_version"`
	*Task
}

// Save writes t durably. It refuses a task whose invariants are broken.
func (s *Store) Save(t *Task) error { return s.SaveWith(t, nil) }

// SaveWith writes t durably, and beside the task's own keys those of
// own, when not nil: a struct whose JSON is an object, its keys none of
// the task's. A store of the control plane keeps its bookkeeping of the
// task's events there, which is its own and not the task's (LoadWith
// reads it back).
func (s *Store) SaveWith(t *Task, own any) error {
	if err := ValidateID(t.ID); err != nil {
		return fmt.Errorf("state: save: %w", err)
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("state: save task %s: %w", t.ID, err)
	}
	b, err := json.Marshal(file{SchemaVersion, t})
	if err == nil && own != nil {
		var o []byte
		if o, err = json.Marshal(own); err == nil {
			switch {
			case len(o) < 2 || o[0] != '{':
				err = fmt.Errorf("its own keys are not an object: %.40s", o)
			case len(o) > 2:
				b = append(append(b[:len(b)-1], ','), o[1:]...)
			}
		}
	}
	var out bytes.Buffer
	if err == nil {
		// As json.MarshalIndent writes it: the same file as ever.
		err = json.Indent(&out, b, "", "  ")
	}
	if err != nil {
		return fmt.Errorf("state: save task %s: %w", t.ID, err)
	}
	out.WriteByte('\n')
	if err := atomic.WriteFile(s.Path(t.ID), &out); err != nil {
		return fmt.Errorf("state: save task %s: %w", t.ID, err)
	}
	return durable.SyncDir(s.dir)
}

// Load reads task id.
func (s *Store) Load(id string) (*Task, error) { return s.LoadWith(id, nil) }

// LoadWith reads task id, and decodes the keys SaveWith wrote beside it
// into own, when not nil (a pointer).
func (s *Store) LoadWith(id string, own any) (*Task, error) {
	if err := ValidateID(id); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return loadFile(s.Path(id), func(*Task) any { return own })
}

// LoadAll reads every task. A file that cannot be read costs only itself:
// the others are returned, with an error naming each bad file.
func (s *Store) LoadAll() ([]*Task, error) { return s.LoadAllWith(nil) }

// LoadAllWith is LoadAll that also decodes, of each task t it reads, the
// keys SaveWith wrote beside it into own(t), when own and own(t) are not
// nil.
func (s *Store) LoadAllWith(own func(t *Task) any) ([]*Task, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	var (
		tasks []*Task
		errs  []error
	)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue // atomic's temporary files end otherwise
		}
		if !e.Type().IsRegular() {
			// A FIFO would block the read forever, a link could point
			// anywhere: only regular files are tasks.
			errs = append(errs, fmt.Errorf("state: %s is not a regular file (%s); skipped", filepath.Join(s.dir, e.Name()), e.Type()))
			continue
		}
		t, err := loadFile(filepath.Join(s.dir, e.Name()), own)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tasks = append(tasks, t)
	}
	slices.SortFunc(tasks, func(a, b *Task) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return tasks, errors.Join(errs...)
}

// Delete removes task id's file.
func (s *Store) Delete(id string) error {
	if err := ValidateID(id); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if err := os.Remove(s.Path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	return durable.SyncDir(s.dir)
}

// readRegular reads a regular file, following no symbolic link and never
// blocking on a FIFO planted in its place.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, info.Mode().Type())
	}
	return io.ReadAll(f)
}

// loadFile reads one task file, normalizing an older format, and
// decodes it into own(t) too, when own and own(t) are not nil.
func loadFile(path string, own func(t *Task) any) (*Task, error) {
	b, err := readRegular(path)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("state: task file %s: %s", path, fmt.Sprintf(format, args...))
	}
	var probe struct {
		SchemaVersion *int `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, bad("not a task (%v)", err)
	}
	var t *Task
	switch {
	case probe.SchemaVersion == nil:
		if t, err = normalizeLegacy(b); err != nil {
			return nil, bad("%v", err)
		}
	case *probe.SchemaVersion == SchemaVersion:
		t = &Task{}
		if err := json.Unmarshal(b, t); err != nil {
			return nil, bad("%v", err)
		}
	default:
		return nil, bad("schema version %d is not one this agent reads (it reads %d and older)", *probe.SchemaVersion, SchemaVersion)
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".json"); t.ID != want {
		return nil, bad("holds task %q, not %q", t.ID, want)
	}
	if t.Attempts == nil {
		t.Attempts = []Attempt{}
	}
	if err := t.Check(); err != nil {
		return nil, bad("%v", err)
	}
	if own != nil {
		if o := own(t); o != nil {
			if err := json.Unmarshal(b, o); err != nil {
				return nil, bad("%v", err)
			}
		}
	}
	return t, nil
}

// legacyTask is the format before schema versions: a status instead of a
// phase, and no attempts.
type legacyTask struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Prompt    string    `json:"prompt"`
	Status    string    `json:"status"`
	Error     string    `json:"error"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// legacyPhase maps an old status to a phase: queued stays queued, running
// becomes claimed (the agent that had it will reconcile it), and terminal
// statuses keep their phase.
func legacyPhase(status string) (Phase, error) {
	switch p := Phase(status); {
	case p == PhaseQueued:
		return PhaseQueued, nil
	case status == "running":
		return PhaseClaimed, nil
	case status == "canceled":
		return PhaseCancelled, nil
	case p.Terminal():
		return p, nil
	}
	return "", fmt.Errorf("unknown status %q", status)
}

func normalizeLegacy(b []byte) (*Task, error) {
	var old legacyTask
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	phase, err := legacyPhase(old.Status)
	if err != nil {
		return nil, err
	}
	t := &Task{ID: old.ID, Title: old.Title, Prompt: old.Prompt, Phase: phase, PhaseReason: old.Error,
		CreatedAt: old.CreatedAt, UpdatedAt: old.UpdatedAt, Attempts: []Attempt{}}
	if phase.Running() {
		t.LastProgressAt = old.UpdatedAt
	}
	t.project()
	return t, nil
}
