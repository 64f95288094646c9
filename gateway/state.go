package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The state file is the gateway's index of the calls it holds: for each
// call waiting on an Arbiter task (or decided, and not yet answered to the
// agent), the task's id, under the call's key (its upstream, client, tool
// and arguments' digest). A call the agent sends again after the gateway
// restarted finds its task there, instead of asking a person again; two
// gateways on one machine that share the file attach the same call to one
// task.
//
// The file only says which task a call waits on. Whether the approved
// action ran lives in Arbiter, beside the task (an execution claim): that
// is the record every process that may see the approval reaches, and the
// one that must be atomic. Losing the file costs a second approval for a
// call in flight, never a second run of an approved one.
//
// Writes replace the file whole (a temporary file renamed over it), under
// an exclusive lock of a file beside it where the system has one, so that
// two processes' writes do not undo each other. Entries older than
// stateRetention are dropped.

// stateRetention is how long an entry is kept: as long as Arbiter keeps an
// idempotency key.
const stateRetention = 7 * 24 * time.Hour

// maxStateEntries bounds the file: past it, the oldest entries go.
const maxStateEntries = 10000

// State is the gateway's state file. It is safe for concurrent use.
type State struct {
	path string
	mu   sync.Mutex
	// entries is the file as last read or written, for a gateway whose
	// file cannot be written any more (a full disk): it goes on in memory.
	entries []stateEntry
}

// stateEntry is one held call.
type stateEntry struct {
	// Key is the call's key (heldKey).
	Key    string `json:"key"`
	TaskID string `json:"task_id"`
	Tool   string `json:"tool"`
	// Digest is the digest of the call's action as the agent sent it.
	Digest string `json:"digest"`
	// Approve are the verdicts that run the call; Line is the policy
	// rule that held it.
	Approve   []string  `json:"approve"`
	Line      int       `json:"rule_line"`
	CreatedAt time.Time `json:"created_at"`
}

// stateFile is the file's JSON.
type stateFile struct {
	Version int          `json:"version"`
	Calls   []stateEntry `json:"calls"`
}

// OpenState opens the state file at path, creating its directory (private
// to the user) and the file when absent. It fails when the file cannot be
// read or written, or holds something else than a gateway's state.
func OpenState(path string) (*State, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("the state file's directory: %w", err)
	}
	s := &State{path: path}
	var err error
	s.entries, err = s.read()
	if err != nil {
		return nil, err
	}
	if err := s.update(func(entries []stateEntry) []stateEntry { return entries }); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the file's path.
func (s *State) Path() string { return s.path }

// read reads the file; a file not there yet is empty.
func (s *State) read() ([]stateEntry, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read the state file: %w", err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 {
		return nil, fmt.Errorf("the state file %s is not a gateway's state (version 1); move it away to start afresh", s.path)
	}
	return f.Calls, nil
}

// find returns the entry that match reports, reading the file again (it
// may have been written by another process).
func (s *State) find(match func(stateEntry) bool) (stateEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if entries, err := s.read(); err == nil {
		s.entries = entries
	}
	for _, e := range s.entries {
		if match(e) {
			return e, true
		}
	}
	return stateEntry{}, false
}

// FindKey returns the entry of the call key.
func (s *State) FindKey(key string) (stateEntry, bool) {
	return s.find(func(e stateEntry) bool { return e.Key == key })
}

// FindTask returns the entry of the call waiting on task id.
func (s *State) FindTask(id string) (stateEntry, bool) {
	return s.find(func(e stateEntry) bool { return e.TaskID == id })
}

// All returns every entry, newest first.
func (s *State) All() []stateEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if entries, err := s.read(); err == nil {
		s.entries = entries
	}
	out := slices.Clone(s.entries)
	slices.Reverse(out)
	return out
}

// Put records e, replacing an entry of its key.
func (s *State) Put(e stateEntry) error {
	return s.update(func(entries []stateEntry) []stateEntry {
		entries = slices.DeleteFunc(entries, func(x stateEntry) bool { return x.Key == e.Key })
		return append(entries, e)
	})
}

// Remove forgets the entry of the call key on task id (another task's
// entry under the key stays: a newer call's).
func (s *State) Remove(key, taskID string) error {
	return s.update(func(entries []stateEntry) []stateEntry {
		return slices.DeleteFunc(entries, func(x stateEntry) bool { return x.Key == key && x.TaskID == taskID })
	})
}

// update rewrites the file with change applied to what it holds now,
// dropping entries past their retention.
func (s *State) update(change func([]stateEntry) []stateEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("lock the state file: %w", err)
	}
	defer unlock()
	entries, err := s.read()
	if err != nil {
		return err
	}
	entries = change(entries)
	cutoff := time.Now().Add(-stateRetention)
	entries = slices.DeleteFunc(entries, func(e stateEntry) bool { return e.CreatedAt.Before(cutoff) })
	if len(entries) > maxStateEntries {
		entries = entries[len(entries)-maxStateEntries:]
	}
	s.entries = entries
	b, err := json.MarshalIndent(stateFile{Version: 1, Calls: entries}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write the state file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write the state file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write the state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("write the state file: %w", err)
	}
	return nil
}
