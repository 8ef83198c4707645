package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/wophost/wophost/internal/atomicfile"
)

// numShards is how many lock files split the store, so that requests
// under unrelated keys rarely wait for each other's disk syncs.
const numShards = 16

// staleTempAge is how old a temporary file must be before Prune takes it
// for the leftover of an interrupted write: a write takes milliseconds.
const staleTempAge = time.Hour

// FileStore is the embedded Store: one JSON file per key, dir/<id>.json,
// each written through a synced temporary file and a rename (so it is
// whole or absent after a crash), and lock files dir/.lock-0 … .lock-f
// that serialise the check-then-write of Claim, Complete and Release
// across goroutines and processes.
type FileStore struct {
	dir string
	// maxRecordBytes bounds a record read back.
	maxRecordBytes int64
	shards         [numShards]shard
	// synced, when not nil, is told of each sync a write made (the
	// record, then its directory); set only by this package's tests.
	synced func(path string)
}

type shard struct {
	// mu serialises the goroutines of this process: one flock.Flock is
	// not meant to be locked by two goroutines at once.
	mu   sync.Mutex
	lock *flock.Flock
}

// OpenFileStore opens (creating it if needed) the store in dir. A record
// read back may be at most maxRecordBytes long.
func OpenFileStore(dir string, maxRecordBytes int64) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("idempotency store %s: %w", dir, err)
	}
	s := &FileStore{dir: dir, maxRecordBytes: maxRecordBytes}
	for i := range s.shards {
		s.shards[i].lock = flock.New(filepath.Join(dir, fmt.Sprintf(".lock-%x", i)), flock.SetPermissions(0o600))
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

func checkID(id string) error {
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("idempotency record id %q is not a hex SHA-256", id)
	}
	return nil
}

func (s *FileStore) path(id string) string { return filepath.Join(s.dir, id+".json") }

// locked runs fn holding the lock of id's shard, in this process and
// across processes.
func (s *FileStore) locked(id string, fn func() error) error {
	if err := checkID(id); err != nil {
		return err
	}
	n := strings.IndexByte("0123456789abcdef", id[0])
	sh := &s.shards[n]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if err := sh.lock.Lock(); err != nil {
		return fmt.Errorf("lock idempotency store %s: %w", s.dir, err)
	}
	defer func() { _ = sh.lock.Unlock() }()
	return fn()
}

func (s *FileStore) read(id string) (*Record, error) {
	path := s.path(id)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency record: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.maxRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read idempotency record %s: %w", path, err)
	}
	if int64(len(data)) > s.maxRecordBytes {
		return nil, fmt.Errorf("idempotency record %s is over %d bytes", path, s.maxRecordBytes)
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("idempotency record %s: %w", path, err)
	}
	if r.ID != id || (r.State != StatePending && r.State != StateDone) {
		return nil, fmt.Errorf("idempotency record %s: id or state does not match its file", path)
	}
	return &r, nil
}

func (s *FileStore) write(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode idempotency record: %w", err)
	}
	if err := atomicfile.WriteWithHooks(s.path(r.ID), append(data, '\n'), 0o600, atomicfile.Hooks{Synced: s.synced}); err != nil {
		return fmt.Errorf("write idempotency record: %w", err)
	}
	return nil
}

// Get implements Store. A record is replaced by a rename, so a read
// without the lock sees the old record or the new one.
func (s *FileStore) Get(_ context.Context, id string) (*Record, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return s.read(id)
}

// Claim implements Store.
func (s *FileStore) Claim(_ context.Context, claim *Record, now time.Time, ttl time.Duration) (*Record, error) {
	if claim.State != StatePending || claim.Owner == "" {
		return nil, fmt.Errorf("claim of %s: a claim is a pending record with an owner", claim.ID)
	}
	var held *Record
	err := s.locked(claim.ID, func() error {
		cur, err := s.read(claim.ID)
		switch {
		case err == nil && cur.Live(now, ttl):
			held = cur
			return nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
		return s.write(claim)
	})
	return held, err
}

// Complete implements Store.
func (s *FileStore) Complete(_ context.Context, done *Record) error {
	if done.State != StateDone {
		return fmt.Errorf("complete %s: the record is not done", done.ID)
	}
	return s.locked(done.ID, func() error {
		cur, err := s.read(done.ID)
		if errors.Is(err, ErrNotFound) || (err == nil && (cur.State != StatePending || cur.Owner != done.Owner)) {
			return ErrNotOwner
		}
		if err != nil {
			return err
		}
		return s.write(done)
	})
}

// Release implements Store.
func (s *FileStore) Release(_ context.Context, id, owner string) error {
	return s.locked(id, func() error {
		cur, err := s.read(id)
		if errors.Is(err, ErrNotFound) || (err == nil && (cur.State != StatePending || cur.Owner != owner)) {
			return ErrNotOwner
		}
		if err != nil {
			return err
		}
		if err := os.Remove(s.path(id)); err != nil {
			return fmt.Errorf("release idempotency claim: %w", err)
		}
		// Not durable yet is harmless: after a crash the claim is back,
		// and it holds the key only until its lease ends.
		if err := atomicfile.SyncDir(s.dir); err != nil {
			return fmt.Errorf("release idempotency claim: %w", err)
		}
		return nil
	})
}

// Prune implements Store. A file last written before now-ttl can only
// hold a record that is not live, unless it is a pending claim whose
// lease is longer than ttl, which is read and kept; each candidate is
// read again and removed under its lock, so a record written meanwhile
// is never removed. Temporary files of interrupted writes, and records
// that cannot be read, go too.
func (s *FileStore) Prune(ctx context.Context, now time.Time, ttl time.Duration) (removed, remaining int, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, 0, fmt.Errorf("prune idempotency store: %w", err)
	}
	type candidate struct {
		id  string
		mod time.Time
	}
	var old []candidate
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, atomicfile.TempPrefix) {
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > staleTempAge {
				_ = os.Remove(filepath.Join(s.dir, name))
			}
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || checkID(id) != nil {
			continue
		}
		remaining++
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if info.ModTime().Before(now.Add(-ttl)) {
			old = append(old, candidate{id, info.ModTime()})
		}
	}
	slices.SortFunc(old, func(a, b candidate) int { return a.mod.Compare(b.mod) })
	// One unreadable record must not stop the pruning of the others: the
	// first error is returned once the rest are done.
	var first error
	for _, c := range old {
		if err := ctx.Err(); err != nil {
			return removed, remaining, err
		}
		err := s.locked(c.id, func() error {
			cur, err := s.read(c.id)
			if errors.Is(err, ErrNotFound) {
				remaining--
				return nil
			}
			// A record that cannot be read, last written before now-ttl,
			// can hold nothing a client may still repeat: it goes too,
			// or it would stay forever. Its error is still reported.
			if err == nil && cur.Live(now, ttl) {
				return nil
			}
			if rerr := os.Remove(s.path(c.id)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return rerr
			}
			removed++
			remaining--
			if err != nil {
				return fmt.Errorf("removed an unreadable record: %w", err)
			}
			return nil
		})
		if err != nil && first == nil {
			first = fmt.Errorf("prune idempotency store: %w", err)
		}
	}
	if removed > 0 {
		if err := atomicfile.SyncDir(s.dir); err != nil && first == nil {
			first = fmt.Errorf("prune idempotency store: %w", err)
		}
	}
	return removed, remaining, first
}
