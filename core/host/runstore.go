package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wophost/wophost/internal/atomicfile"
)

// runRecordStore keeps run records: files under state_dir/runs with the
// embedded backend, rows of the host's schema with postgres. Both keep a
// record as the same bytes.
type runRecordStore interface {
	// put stores the record of runID durably and returns where it is:
	// the file's path, or the run id for a row.
	put(ctx context.Context, runID string, data []byte) (string, error)
	// get returns the bytes of runID's record, or an error matching
	// fs.ErrNotExist when there is none: for a run whose record retention
	// pruned, while its tombstone is kept, that error is also the
	// *wop.Error with code CodeRunExpired (errRunExpired).
	get(ctx context.Context, runID string) ([]byte, error)
	// prune applies the retention (see pruneRunRecords), leaving a
	// tombstone of each record it removes and bounding the tombstones by
	// the same maxAge and maxCount, and returns how many records it
	// removed and how many it kept.
	prune(ctx context.Context, now time.Time, maxAge time.Duration, maxCount int, inFlight func(runID string) bool) (removed, kept int, err error)
	// list returns at most n summaries of the records filter selects
	// that come after the cursor (nil: from the first), newest first
	// (ListRuns).
	list(ctx context.Context, filter *RunFilter, after *runCursor, n int) ([]RunSummary, error)
	// where names the store in messages.
	where() string
}

// fileRunRecords is the embedded runRecordStore: dir/<runId>.json.
type fileRunRecords struct {
	dir string
	// synced, when not nil, is told of each sync (atomicfile.Hooks.Synced).
	synced func(path string)
	// cache keeps the summaries list read, for the next listing; nil
	// reads every record at each listing.
	cache *summaryCache
}

func (f *fileRunRecords) where() string { return f.dir }

// put writes through a synced temporary file and a rename, so a record is
// whole or absent, and syncs the directory, so that the record is durable
// before the run answers.
func (f *fileRunRecords) put(_ context.Context, runID string, data []byte) (string, error) {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return "", fmt.Errorf("run records: %w", err)
	}
	path := filepath.Join(f.dir, runID+".json")
	if err := atomicfile.WriteWithHooks(path, data, 0o600, atomicfile.Hooks{Synced: f.synced}); err != nil {
		return "", fmt.Errorf("write run record: %w", err)
	}
	return path, nil
}

func (f *fileRunRecords) get(_ context.Context, runID string) ([]byte, error) {
	data, err := readRunRecordIn(f.dir, runID)
	if !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	prunedAt, ok, terr := fileTombstone(f.dir, runID)
	switch {
	case terr != nil:
		return nil, terr
	case ok:
		return nil, errRunExpired(runID, prunedAt)
	}
	return nil, err
}

func (f *fileRunRecords) prune(ctx context.Context, now time.Time, maxAge time.Duration, maxCount int, inFlight func(string) bool) (int, int, error) {
	return pruneRunRecords(ctx, f.dir, now, maxAge, maxCount, inFlight)
}

// readRunRecordFile reads a run record's file, at most maxRunRecordBytes.
func readRunRecordFile(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxRunRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read run record %s: %w", path, err)
	}
	if len(data) > maxRunRecordBytes {
		return nil, fmt.Errorf("run record %s is over %d bytes", path, maxRunRecordBytes)
	}
	return data, nil
}

// readRunRecordIn reads the record of runID inside dir through os.Root,
// never through a symbolic link: the file opened must be the regular
// file dir holds under the record's name, which a link to it (inside the
// directory or not) is not. A link is replay_source_missing with the
// reason RecordLink.
func readRunRecordIn(dir, runID string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	name := runID + ".json"
	info, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errRecordUnusable(runID, RecordLink, "its file is a symbolic link or no regular file, which a record never is")
	}
	file, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	// Open follows a link that stays inside the root: the file opened
	// must be the one Lstat saw, not a link put in its place since.
	if opened, err := file.Stat(); err != nil || !os.SameFile(info, opened) {
		return nil, errRecordUnusable(runID, RecordLink, "its file was replaced while it was opened")
	}
	data, err := io.ReadAll(io.LimitReader(file, maxRunRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read run record %s: %w", runID, err)
	}
	if len(data) > maxRunRecordBytes {
		return nil, fmt.Errorf("run record %s is over %d bytes", runID, maxRunRecordBytes)
	}
	return data, nil
}

// pgRunRecords is the postgres runRecordStore: the table run_records of
// the host's schema, which every host on the database reads, so a run
// recorded by one host replays on another.
type pgRunRecords struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

func (p *pgRunRecords) where() string { return "the table run_records" }

// put writes the record's bytes and, beside them, the fields a listing
// filters and orders by. Bytes that are no run record leave those
// columns null, which the table's trigger then fills as an unreadable
// record's (migration 004).
func (p *pgRunRecords) put(ctx context.Context, runID string, data []byte) (string, error) {
	var args []any
	if s, ok := summarizeBytes(runID, data); ok {
		args = []any{s.TypeID, s.Pack, s.Outcome, nullable(s.ErrorCode), nullable(s.IdempotencyKey), s.Owner,
			s.StartedAt, s.FinishedAt, nullable(s.ReplayOf), s.Calls}
	} else {
		args = make([]any, 10)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO run_records (run_id, record, created_at,
			type_id, pack, outcome, error_code, idempotency_key, owner, started_at, finished_at, replay_of, calls)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		append([]any{runID, data, p.now().UTC()}, args...)...); err != nil {
		return "", fmt.Errorf("write run record: %w", err)
	}
	return runID, nil
}

// nullable is s, or SQL's null for the empty string: an absent field.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (p *pgRunRecords) get(ctx context.Context, runID string) ([]byte, error) {
	var data []byte
	err := p.pool.QueryRow(ctx, `SELECT record FROM run_records WHERE run_id = $1`, runID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		prunedAt, ok, terr := pgTombstone(ctx, p.pool, runID)
		switch {
		case terr != nil:
			return nil, terr
		case ok:
			return nil, errRunExpired(runID, prunedAt)
		}
		return nil, fmt.Errorf("run record %s: %w", runID, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read run record %s: %w", runID, err)
	}
	return data, nil
}

// prune deletes what pruneRunRecords would of the files: the oldest
// records past maxAge, then past maxCount, never one of a run in flight.
// One statement deletes the records and writes their tombstones, so a
// record never goes without one; the tombstones are then bounded
// (prunePgTombstones). A record another host pruned meanwhile counts as
// neither removed nor kept.
func (p *pgRunRecords) prune(ctx context.Context, now time.Time, maxAge time.Duration, maxCount int, inFlight func(string) bool) (removed, kept int, err error) {
	rows, err := p.pool.Query(ctx, `SELECT run_id, created_at FROM run_records ORDER BY created_at, run_id`)
	if err != nil {
		return 0, 0, fmt.Errorf("prune run records: %w", err)
	}
	type record struct {
		id      string
		created time.Time
	}
	records, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (record, error) {
		var rec record
		return rec, r.Scan(&rec.id, &rec.created)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("prune run records: %w", err)
	}
	var doomed []string
	excess := len(records) - maxCount
	for _, r := range records {
		if now.Sub(r.created) <= maxAge && excess <= 0 {
			break // every record from here on is younger and within the count
		}
		if inFlight != nil && inFlight(r.id) {
			continue
		}
		doomed = append(doomed, r.id)
		excess--
	}
	kept = len(records)
	if len(doomed) > 0 {
		// The upsert's count is the deleted records': each gets exactly
		// one tombstone row, new or refreshed.
		tag, err := p.pool.Exec(ctx, `WITH gone AS (DELETE FROM run_records WHERE run_id = ANY($1) RETURNING run_id)
			INSERT INTO run_tombstones (run_id, pruned_at) SELECT run_id, $2 FROM gone
			ON CONFLICT (run_id) DO UPDATE SET pruned_at = EXCLUDED.pruned_at`, doomed, now.UTC())
		if err != nil {
			return 0, len(records), fmt.Errorf("prune run records: %w", err)
		}
		removed = int(tag.RowsAffected())
		gone := len(doomed) - removed
		kept = len(records) - removed - gone
	}
	if _, err := prunePgTombstones(ctx, p.pool, now, maxAge, maxCount); err != nil {
		return removed, kept, fmt.Errorf("prune run records: %w", err)
	}
	return removed, kept, nil
}

// MaxRunIDHexDigits bounds the hex part of a run id. The host names its
// runs with 24 digits; the bound leaves room and keeps every record's name
// far below a file system's 255 bytes.
const MaxRunIDHexDigits = 64

// IsRunID reports whether s has the shape of a run id: "run_" and 1 to
// MaxRunIDHexDigits lowercase hex digits, as a run record is named. It is
// checked before any file or row is looked up.
func IsRunID(s string) bool {
	hex, ok := strings.CutPrefix(s, "run_")
	return ok && hex != "" && len(hex) <= MaxRunIDHexDigits && strings.Trim(hex, "0123456789abcdef") == ""
}
