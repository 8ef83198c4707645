package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/sdk/wop"
)

// CodeRunExpired is the code of the error the run record store answers
// for a run whose record retention has pruned: the run existed, and its
// record is gone for good. OpenWOP refuses a replay of such a run with it
// (HTTP 410). A run id never recorded stays not found.
const CodeRunExpired = httpstatus.CodeRunExpired

// ExpiredDir is the directory under state_dir/runs that holds the
// tombstones of pruned runs with the embedded backend: an empty file
// named by each run id, whose modification time is when its record was
// pruned.
const ExpiredDir = "expired"

// Tombstones are bounded as the records are: a tombstone is kept for as
// long again as retention.run_records after its record was pruned, and at
// most retention.max_run_records of them, the oldest going first. So an id
// is answered run_expired for a while after its record goes, then
// not_found, and the tombstones never outgrow the records.

// runExpiredError is what a store's get answers for a tombstoned run: the
// *wop.Error with code run_expired, which errors.As and wop.CodeOf find,
// and fs.ErrNotExist, which errors.Is finds, so that a caller that only
// knows "no record" keeps working.
type runExpiredError struct {
	err *wop.Error
}

// errRunExpired is the answer for run runID, whose record was pruned at
// prunedAt.
func errRunExpired(runID string, prunedAt time.Time) error {
	at := prunedAt.UTC().Format(time.RFC3339)
	e := wop.Errorf(CodeRunExpired, "the record of run %s was pruned by retention at %s", runID, at).
		WithDetails(map[string]string{"runId": runID, "prunedAt": at})
	return &runExpiredError{err: e}
}

// Error implements error: the envelope's own text.
func (e *runExpiredError) Error() string { return e.err.Error() }

// Unwrap gives errors.Is and errors.As both the envelope and
// fs.ErrNotExist.
func (e *runExpiredError) Unwrap() []error { return []error{e.err, fs.ErrNotExist} }

// fileTombstone reports when runID's record was pruned, from its
// tombstone under dir/ExpiredDir; ok is false when there is none.
func fileTombstone(dir, runID string) (prunedAt time.Time, ok bool, err error) {
	info, err := os.Stat(filepath.Join(dir, ExpiredDir, runID))
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read tombstone of run %s: %w", runID, err)
	}
	return info.ModTime(), true, nil
}

// writeFileTombstones leaves a tombstone for each of ids under
// dir/ExpiredDir, pruned at now, and syncs the directory: a record is
// removed only once its tombstone is durable, so a crash leaves a record
// with its tombstone (pruned again next time) rather than an id that
// answers not_found.
func writeFileTombstones(dir string, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	tdir := filepath.Join(dir, ExpiredDir)
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		return fmt.Errorf("write tombstones: %w", err)
	}
	for _, id := range ids {
		path := filepath.Join(tdir, id)
		file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("write tombstone of run %s: %w", id, err)
		}
		if err := file.Close(); err != nil {
			return fmt.Errorf("write tombstone of run %s: %w", id, err)
		}
		// The file's time is when its record was pruned, also for a
		// tombstone left by a pruning a crash interrupted.
		if err := os.Chtimes(path, now, now); err != nil {
			return fmt.Errorf("write tombstone of run %s: %w", id, err)
		}
	}
	if err := atomicfile.SyncDir(tdir); err != nil {
		return fmt.Errorf("write tombstones: %w", err)
	}
	return nil
}

// pruneFileTombstones removes, oldest first, the tombstones under
// dir/ExpiredDir older than maxAge and then as many more as it takes to
// keep at most maxCount. It returns how many it removed; a missing
// directory holds none.
func pruneFileTombstones(ctx context.Context, dir string, now time.Time, maxAge time.Duration, maxCount int) (int, error) {
	tdir := filepath.Join(dir, ExpiredDir)
	entries, err := os.ReadDir(tdir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune tombstones: %w", err)
	}
	type tombstone struct {
		name string
		mod  time.Time
	}
	stones := make([]tombstone, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || !strings.HasPrefix(e.Name(), "run_") {
			continue
		}
		stones = append(stones, tombstone{name: e.Name(), mod: info.ModTime()})
	}
	slices.SortFunc(stones, func(a, b tombstone) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	removed, excess := 0, len(stones)-maxCount
	for _, s := range stones {
		if now.Sub(s.mod) <= maxAge && excess <= 0 {
			break // every tombstone from here on is younger and within the count
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if err := os.Remove(filepath.Join(tdir, s.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("prune tombstone %s: %w", s.name, err)
		}
		removed++
		excess--
	}
	if removed > 0 {
		if err := atomicfile.SyncDir(tdir); err != nil {
			return removed, fmt.Errorf("prune tombstones: %w", err)
		}
	}
	return removed, nil
}

// pgTombstone reports when runID's record was pruned, from the table
// run_tombstones; ok is false when there is none.
func pgTombstone(ctx context.Context, pool *pgxpool.Pool, runID string) (prunedAt time.Time, ok bool, err error) {
	err = pool.QueryRow(ctx, `SELECT pruned_at FROM run_tombstones WHERE run_id = $1`, runID).Scan(&prunedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read tombstone of run %s: %w", runID, err)
	}
	return prunedAt, true, nil
}

// prunePgTombstones deletes the rows of run_tombstones older than maxAge
// and, past maxCount, the oldest, in one statement. It returns how many it
// deleted.
func prunePgTombstones(ctx context.Context, pool *pgxpool.Pool, now time.Time, maxAge time.Duration, maxCount int) (int, error) {
	tag, err := pool.Exec(ctx, `DELETE FROM run_tombstones WHERE pruned_at < $1 OR run_id IN (
		SELECT run_id FROM run_tombstones ORDER BY pruned_at DESC, run_id DESC OFFSET $2)`,
		now.Add(-maxAge).UTC(), maxCount)
	if err != nil {
		return 0, fmt.Errorf("prune tombstones: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
