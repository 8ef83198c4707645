// Package store keeps the aiEnvelope plugin's envelopes in an embedded
// SQLite database: one row per idempotency key, holding the request's
// digest, its state (pending, completed, failed) and the recorded result
// or error. It backs both idempotency and async jobs, so both survive a
// killed plugin.
//
// One process at a time owns a store: Open takes an exclusive lock on a
// file beside the database and holds it until Close (or until the process
// dies, when the kernel releases it). The lock matters because what a
// process does at start, re-running or releasing the envelopes left
// pending, is only right when no other process is still working on them.
//
// Finished envelopes are kept until Prune deletes them; Reclaim and
// Vacuum give the freed space back to the file system.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// States of an envelope.
const (
	StatePending   = "pending"
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// ErrNotFound is returned when no envelope matches.
var ErrNotFound = errors.New("envelope not found")

// ErrLocked is returned by Open when another process holds the store.
var ErrLocked = errors.New("in use by another process")

// LockSuffix is appended to the database path to name its lock file. The
// file holds the pid of the process that has the store open; it is never
// removed, because removing a lock file another process is waiting on
// would let two processes lock two different files.
const LockSuffix = ".lock"

// lockRetry is how often Open tries a held lock again while it waits.
const lockRetry = 25 * time.Millisecond

// vacuumStep is the number of free pages one incremental_vacuum gives
// back: 1 MiB with SQLite's default page size, a few milliseconds of the
// write lock (4 MiB steps took 17 ms at the median on a disk that syncs).
const vacuumStep = 256

// Envelope is one stored row.
type Envelope struct {
	Key        string
	Digest     string
	ID         string
	Type       string
	State      string
	Async      bool
	Request    []byte // the request as received, to re-run an async job
	Result     []byte // the result JSON when completed
	Error      []byte // the error envelope JSON when failed
	CreatedAt  time.Time
	FinishedAt time.Time
}

// Store is an open database and the lock that makes it this process's.
type Store struct {
	db   *sql.DB
	lock *flock.Flock
	path string
	// afterBatch, when set, runs between two batches of Prune (tests).
	afterBatch func()
}

const schema = `
CREATE TABLE IF NOT EXISTS envelopes (
  key          TEXT PRIMARY KEY,
  digest       TEXT NOT NULL,
  id           TEXT NOT NULL UNIQUE,
  type         TEXT NOT NULL,
  state        TEXT NOT NULL CHECK (state IN ('pending','completed','failed')),
  async        INTEGER NOT NULL,
  request      BLOB NOT NULL,
  result       BLOB,
  error        BLOB,
  created_at   INTEGER NOT NULL,
  finished_at  INTEGER
);
CREATE INDEX IF NOT EXISTS envelopes_pending ON envelopes(state) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS envelopes_finished ON envelopes(finished_at) WHERE state != 'pending';
`

// Open opens (creating if needed) the database at path, first taking the
// store's lock. A lock held by another process is waited for until ctx
// ends, so a restart right after a crash, while the old process is still
// exiting, does not fail; then Open fails with ErrLocked, naming the
// holder's pid.
//
// The database runs in WAL mode with a busy timeout. synchronous=FULL
// syncs the WAL at every commit: an envelope or job the plugin has
// answered for survives a crash of the machine, not only of the process.
// A new database is created with incremental auto-vacuum, so that Reclaim
// can shrink the file after a prune.
func Open(ctx context.Context, path string) (*Store, error) {
	return openWaiting(ctx, path, nil)
}

// openWaiting is Open; waiting, when not nil, is called once the lock is
// found held and before Open waits for it, so that a test can act while
// the opener waits.
func openWaiting(ctx context.Context, path string, waiting func()) (*Store, error) {
	lock, err := acquire(ctx, path+LockSuffix, waiting)
	if err != nil {
		return nil, err
	}
	// auto_vacuum must come before the first table is created to take
	// effect; on an existing database it only matters to Vacuum.
	dsn := "file:" + path + "?_pragma=auto_vacuum(INCREMENTAL)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		_ = lock.Unlock()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One writer at a time is SQLite's rule; one connection makes it ours
	// too and keeps the pragmas on every statement.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		_ = lock.Unlock()
		return nil, fmt.Errorf("prepare %s: %w", path, err)
	}
	return &Store{db: db, lock: lock, path: path}, nil
}

// acquire takes the exclusive lock at path, waiting until ctx ends, and
// writes this process's pid into it for the message of the next process
// that finds it held. waiting, when not nil, is called once the lock is
// found held, before the wait.
func acquire(ctx context.Context, path string, waiting func()) (*flock.Flock, error) {
	start := time.Now()
	lock := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR))
	ok, err := lock.TryLock()
	if err == nil && !ok {
		if waiting != nil {
			waiting()
		}
		ok, err = lock.TryLockContext(ctx, lockRetry)
	}
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "process " + strconv.Itoa(pid)
			}
		}
		return nil, fmt.Errorf("%w: %s holds %s (waited %s); one plugin process at a time may open the store",
			ErrLocked, holder, path, time.Since(start).Round(time.Millisecond))
	}
	// The pid only improves another process's error message, so a failure
	// to write it does not stop this one.
	_ = os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	return lock, nil
}

// Close closes the database, then releases the lock: the next process
// may open the store only once nothing of this one writes to it.
func (s *Store) Close() error {
	err := s.db.Close()
	if uerr := s.lock.Unlock(); uerr != nil {
		err = errors.Join(err, fmt.Errorf("unlock %s: %w", s.lock.Path(), uerr))
	}
	return err
}

// Prune deletes the finished (completed or failed) envelopes that
// finished before cutoff, oldest first, at most batch rows per statement,
// and returns how many it deleted. A pending envelope is never deleted,
// however old: it is a job still to run or a call still in progress.
//
// Each batch is a transaction of its own on the store's one connection,
// so calls waiting for the database get it between two batches and a big
// prune never holds the write lock for long. Prune stops between batches
// when ctx ends, returning what it deleted so far with ctx's error.
func (s *Store) Prune(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	return pruneBatches(ctx, cutoff, batch, s.afterBatch, func(ctx context.Context) (int64, error) {
		// The inner query walks envelopes_finished (its WHERE implies the
		// index's), so a batch costs what it deletes, not the table's size.
		res, err := s.db.ExecContext(ctx, `DELETE FROM envelopes WHERE rowid IN (
  SELECT rowid FROM envelopes WHERE state != 'pending' AND finished_at < ? ORDER BY finished_at LIMIT ?)`,
			cutoff.UnixMilli(), batch)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}

// pruneBatches runs deleteBatch until it deletes fewer than batch rows or
// ctx ends, calling afterBatch (when set) between two batches, and
// returns how many rows it deleted.
func pruneBatches(ctx context.Context, cutoff time.Time, batch int, afterBatch func(), deleteBatch func(context.Context) (int64, error)) (int, error) {
	if batch <= 0 {
		return 0, fmt.Errorf("prune: batch size %d is not positive", batch)
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("prune: %w", err)
		}
		n, err := deleteBatch(ctx)
		if err != nil {
			return total, fmt.Errorf("prune envelopes finished before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
		}
		total += int(n)
		if n < int64(batch) {
			return total, nil
		}
		if afterBatch != nil {
			afterBatch()
		}
	}
}

// Incremental reports whether the database runs with incremental
// auto-vacuum, so that Reclaim can shrink it. A database created before
// the store asked for it does not until Vacuum has rewritten it.
func (s *Store) Incremental(ctx context.Context) (bool, error) {
	var mode int
	if err := s.db.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return false, fmt.Errorf("read auto_vacuum: %w", err)
	}
	return mode == 2, nil
}

// Reclaim gives the pages that deletions freed back to the file system,
// vacuumStep pages per statement so that no step holds the write lock for
// long, then checkpoints the WAL and truncates it, so the files on disk
// shrink now rather than at some later checkpoint. Without incremental
// auto-vacuum the free pages stay in the file, where SQLite reuses them
// for new rows, and only the checkpoint runs.
func (s *Store) Reclaim(ctx context.Context) error {
	inc, err := s.Incremental(ctx)
	if err != nil {
		return err
	}
	// last guards the loop: a step that frees nothing ends it.
	for last := -1; inc; {
		var free int
		if err := s.db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return fmt.Errorf("read freelist_count: %w", err)
		}
		if free == 0 || free == last {
			break
		}
		last = free
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, vacuumStep)); err != nil {
			return fmt.Errorf("incremental vacuum: %w", err)
		}
	}
	return s.checkpoint(ctx)
}

// Vacuum rewrites the whole database with incremental auto-vacuum on: it
// compacts it at once and lets a database created before incremental
// auto-vacuum shrink from then on. It holds the write lock while it
// copies every live row, so it is meant for start-up, before calls are
// served; ctx ending interrupts it and leaves the database as it was.
func (s *Store) Vacuum(ctx context.Context) error {
	// The setting is pending until a VACUUM applies it, and an
	// interrupted VACUUM drops it, so it is set again every time.
	if _, err := s.db.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
		return fmt.Errorf("set auto_vacuum: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM`); err != nil {
		return fmt.Errorf("vacuum %s: %w", s.path, err)
	}
	return s.checkpoint(ctx)
}

func (s *Store) checkpoint(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Size returns the bytes the store takes on disk: the database, its WAL
// and the WAL's index.
func (s *Store) Size() (int64, error) {
	var total int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(s.path + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("size of the store: %w", err)
		}
		total += fi.Size()
	}
	return total, nil
}

// Claim records a new pending envelope under e.Key, or returns the row
// already there (claimed == false). A failed row with the same digest is
// replaced: a failure is not final for its key, so a caller's retry runs
// again.
func (s *Store) Claim(ctx context.Context, e *Envelope) (existing *Envelope, claimed bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	cur, err := scan(tx.QueryRowContext(ctx, selectCols+` WHERE key = ?`, e.Key))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, false, err
	case cur.State == StateFailed && cur.Digest == e.Digest:
		if _, err := tx.ExecContext(ctx, `DELETE FROM envelopes WHERE key = ?`, e.Key); err != nil {
			return nil, false, fmt.Errorf("replace failed envelope: %w", err)
		}
	default:
		return cur, false, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO envelopes (key, digest, id, type, state, async, request, created_at) VALUES (?,?,?,?,?,?,?,?)`,
		e.Key, e.Digest, e.ID, e.Type, StatePending, e.Async, e.Request, e.CreatedAt.UnixMilli())
	if err != nil {
		return nil, false, fmt.Errorf("insert envelope: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("commit: %w", err)
	}
	e.State = StatePending
	return nil, true, nil
}

// Complete records the result of a pending envelope.
func (s *Store) Complete(ctx context.Context, id string, result []byte, at time.Time) error {
	return s.finish(ctx, id, StateCompleted, result, nil, at)
}

// Fail records the error of a pending envelope.
func (s *Store) Fail(ctx context.Context, id string, errJSON []byte, at time.Time) error {
	return s.finish(ctx, id, StateFailed, nil, errJSON, at)
}

func (s *Store) finish(ctx context.Context, id, state string, result, errJSON []byte, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE envelopes SET state = ?, result = ?, error = ?, finished_at = ? WHERE id = ? AND state = 'pending'`,
		state, result, errJSON, at.UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("record %s envelope %s: %w", state, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("record %s envelope %s: %w (or not pending)", state, id, ErrNotFound)
	}
	return nil
}

// Release deletes a pending envelope, leaving its key free: a synchronous
// call that failed records nothing, so the caller may try again.
func (s *Store) Release(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM envelopes WHERE id = ? AND state = 'pending'`, id); err != nil {
		return fmt.Errorf("release envelope %s: %w", id, err)
	}
	return nil
}

// Get returns the envelope with the id.
func (s *Store) Get(ctx context.Context, id string) (*Envelope, error) {
	return scan(s.db.QueryRowContext(ctx, selectCols+` WHERE id = ?`, id))
}

// Pending lists every pending envelope, oldest first.
func (s *Store) Pending(ctx context.Context) ([]*Envelope, error) {
	rows, err := s.db.QueryContext(ctx, selectCols+` WHERE state = 'pending' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list pending envelopes: %w", err)
	}
	defer rows.Close()
	var out []*Envelope
	for rows.Next() {
		e, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

const selectCols = `SELECT key, digest, id, type, state, async, request, result, error, created_at, finished_at FROM envelopes`

type scanner interface{ Scan(...any) error }

func scan(r scanner) (*Envelope, error) {
	var e Envelope
	var created int64
	var finished sql.NullInt64
	err := r.Scan(&e.Key, &e.Digest, &e.ID, &e.Type, &e.State, &e.Async, &e.Request, &e.Result, &e.Error, &created, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read envelope: %w", err)
	}
	e.CreatedAt = time.UnixMilli(created)
	if finished.Valid {
		e.FinishedAt = time.UnixMilli(finished.Int64)
	}
	return &e, nil
}
