package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/sdk/wop"
)

// OutcomeUnreadable is the outcome a listing gives a stored record it
// cannot read: not JSON, not a run record, or altered since it was
// written. Only its run id, and as its start when it was stored, are
// known; it has no owner, so only a listing of every owner's runs (or of
// the runs of the empty owner) shows it.
const OutcomeUnreadable = "unreadable"

// Bounds of a page of ListRuns.
const (
	// DefaultRunListLimit is a page's length when RunFilter.Limit is 0.
	DefaultRunListLimit = 50
	// MaxRunListLimit is the longest page RunFilter.Limit may ask for.
	MaxRunListLimit = 500
)

// maxCursorBytes bounds a cursor read back: the host's are far shorter.
const maxCursorBytes = 256

// RunSummary is what a listing says of one recorded run: the fields of its
// RunRecord that identify and filter it, without its input, output and
// logs.
type RunSummary struct {
	RunID  string `json:"runId"`
	TypeID string `json:"typeId,omitempty"`
	Pack   string `json:"pack,omitempty"`
	// Outcome is OutcomeSucceeded, OutcomeFailed or OutcomeUnreadable.
	Outcome string `json:"outcome"`
	// ErrorCode is the code of the run's error when it failed.
	ErrorCode string `json:"errorCode,omitempty"`
	// StartedAt orders the listing; with the postgres backend it is kept
	// to the microsecond.
	StartedAt      time.Time `json:"startedAt"`
	FinishedAt     time.Time `json:"finishedAt"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	ReplayOf       string    `json:"replayOf,omitempty"`
	// Owner is the scope of the credential the run was asked with
	// (RunRecord.Owner).
	Owner string `json:"owner,omitempty"`
	// Calls is the number of calls in the run's invocation log.
	Calls int `json:"calls"`
}

// RunFilter selects the runs ListRuns lists. Its string fields match
// exactly, and an empty one matches any run.
type RunFilter struct {
	TypeID string
	// Outcome is "", OutcomeSucceeded, OutcomeFailed or
	// OutcomeUnreadable.
	Outcome        string
	ErrorCode      string
	IdempotencyKey string
	// Since and Until bound StartedAt to [Since, Until); a zero time
	// leaves its side open.
	Since, Until time.Time
	// Owner is whose runs are listed while AllOwners is false: only the
	// runs whose RunRecord.Owner equals it, the empty owner included.
	Owner     string
	AllOwners bool
	// Limit is the page's length: 0 is DefaultRunListLimit, and 1 to
	// MaxRunListLimit are accepted.
	Limit int
	// After is the RunPage.Next of the previous page, "" for the first.
	After string
}

// RunPage is one page of a listing: runs newest first (StartedAt
// descending, then run id descending).
type RunPage struct {
	Runs []RunSummary `json:"runs"`
	// Next is the RunFilter.After of the following page; "" on the last.
	Next string `json:"next"`
}

// runCursor is a position in a listing: the last run of a page.
type runCursor struct {
	startedAt time.Time
	runID     string
}

// before reports whether s comes after the cursor in a listing's order.
func (c *runCursor) before(s *RunSummary) bool {
	if c == nil {
		return true
	}
	if cmp := s.StartedAt.Compare(c.startedAt); cmp != 0 {
		return cmp < 0
	}
	return s.RunID < c.runID
}

// cursorVersion starts every cursor the host makes.
const cursorVersion = "r1"

// encodeCursor makes the opaque cursor of the listing position after s.
// It carries a short checksum, so that a cursor edited by hand or cut
// short is refused rather than taken for another position.
func encodeCursor(s *RunSummary) string {
	body := fmt.Sprintf("%s.%d.%d.%s", cursorVersion, s.StartedAt.Unix(), s.StartedAt.Nanosecond(), s.RunID)
	sum := sha256.Sum256([]byte(body))
	return base64.RawURLEncoding.EncodeToString(append([]byte(body+"."), sum[:4]...))
}

// decodeCursor reads a cursor encodeCursor made; "" is the first page.
func decodeCursor(after string) (*runCursor, error) {
	if after == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return errField("after", "not a cursor of this host's listing (%s); pass the next of the previous page", why)
	}
	if len(after) > maxCursorBytes {
		return nil, bad(fmt.Sprintf("%d bytes, more than any cursor's %d", len(after), maxCursorBytes))
	}
	raw, err := base64.RawURLEncoding.DecodeString(after)
	if err != nil || len(raw) < 5 {
		return nil, bad("not its encoding")
	}
	body, check := raw[:len(raw)-5], raw[len(raw)-5:]
	sum := sha256.Sum256(body)
	if check[0] != '.' || !bytes.Equal(check[1:], sum[:4]) {
		return nil, bad("its checksum does not match")
	}
	parts := strings.Split(string(body), ".")
	if len(parts) != 4 || parts[0] != cursorVersion {
		return nil, bad("not its layout")
	}
	sec, serr := strconv.ParseInt(parts[1], 10, 64)
	nsec, nerr := strconv.ParseInt(parts[2], 10, 64)
	if serr != nil || nerr != nil || nsec < 0 || nsec >= int64(time.Second) || !IsRunID(parts[3]) {
		return nil, bad("not its layout")
	}
	return &runCursor{startedAt: time.Unix(sec, nsec).UTC(), runID: parts[3]}, nil
}

// errField is the validation error of a bad field of a RunFilter, its
// name in details.field as the API's query parameter names it.
func errField(field, format string, args ...any) error {
	return wop.Errorf(wop.CodeValidation, "field %q: %s", field, fmt.Sprintf(format, args...)).
		WithDetails(map[string]string{"field": field})
}

// check validates f and returns its page length and cursor.
func (f *RunFilter) check() (limit int, after *runCursor, err error) {
	switch {
	case f.Limit == 0:
		limit = DefaultRunListLimit
	case f.Limit < 0 || f.Limit > MaxRunListLimit:
		return 0, nil, errField("limit", "%d is outside 1 to %d", f.Limit, MaxRunListLimit)
	default:
		limit = f.Limit
	}
	switch f.Outcome {
	case "", OutcomeSucceeded, OutcomeFailed, OutcomeUnreadable:
	default:
		return 0, nil, errField("outcome", "must be %s, %s or %s", OutcomeSucceeded, OutcomeFailed, OutcomeUnreadable)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return 0, nil, errField("until", "must be after since: runs started in [since, until) are listed")
	}
	after, err = decodeCursor(f.After)
	return limit, after, err
}

// matches reports whether s passes f's filters (not its paging).
func (f *RunFilter) matches(s *RunSummary) bool {
	switch {
	case f.TypeID != "" && s.TypeID != f.TypeID,
		f.Outcome != "" && s.Outcome != f.Outcome,
		f.ErrorCode != "" && s.ErrorCode != f.ErrorCode,
		f.IdempotencyKey != "" && s.IdempotencyKey != f.IdempotencyKey,
		!f.AllOwners && s.Owner != f.Owner,
		!f.Since.IsZero() && s.StartedAt.Before(f.Since),
		!f.Until.IsZero() && !s.StartedAt.Before(f.Until):
		return false
	}
	return true
}

// ListRuns lists the recorded runs f selects, a page at a time, newest
// first, from the host's storage: the files of state_dir/runs with the
// embedded backend, the table run_records with postgres, where the runs of
// every host on the database are listed. A record that cannot be read is
// listed with OutcomeUnreadable rather than failing the listing. A bad
// field of f is a *wop.Error with code validation naming it in
// details.field.
func (h *Host) ListRuns(ctx context.Context, f RunFilter) (*RunPage, error) {
	limit, after, err := f.check()
	if err != nil {
		return nil, err
	}
	store, err := h.state.runRecords(ctx)
	if err != nil {
		return nil, err
	}
	// One more than the page tells whether another page follows.
	runs, err := store.list(ctx, &f, after, limit+1)
	if err != nil {
		return nil, err
	}
	page := &RunPage{Runs: runs}
	if len(runs) > limit {
		page.Runs = runs[:limit]
		page.Next = encodeCursor(&page.Runs[limit-1])
	}
	if page.Runs == nil {
		page.Runs = []RunSummary{}
	}
	return page, nil
}

// summarize is the summary of rec, stored as runID.
func summarize(runID string, rec *RunRecord) RunSummary {
	s := RunSummary{
		RunID: runID, TypeID: rec.TypeID, Pack: rec.Pack, Outcome: rec.Outcome,
		StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt, IdempotencyKey: rec.IdempotencyKey,
		ReplayOf: rec.ReplayOf, Owner: rec.Owner,
	}
	if rec.Outcome == OutcomeFailed && rec.Error != nil {
		s.ErrorCode = rec.Error.Code
	}
	if rec.Invocations != nil {
		s.Calls = len(rec.Invocations.Calls)
	}
	return s
}

// summaryFields is what a summary needs of a record's JSON, decoded
// without its input and output.
type summaryFields struct {
	TypeID         string                 `json:"typeId"`
	Pack           string                 `json:"pack"`
	Outcome        string                 `json:"outcome"`
	StartedAt      time.Time              `json:"startedAt"`
	FinishedAt     time.Time              `json:"finishedAt"`
	IdempotencyKey string                 `json:"idempotencyKey"`
	ReplayOf       string                 `json:"replayOf"`
	Owner          string                 `json:"owner"`
	Error          *struct{ Code string } `json:"error"`
	Invocations    *struct {
		Calls []json.RawMessage `json:"calls"`
	} `json:"invocations"`
}

// summarizeBytes is the summary of the record data the host just encoded,
// which it trusts without checking its digest; ok is false when data is
// no run record.
func summarizeBytes(runID string, data []byte) (s RunSummary, ok bool) {
	var f summaryFields
	if err := json.Unmarshal(data, &f); err != nil || f.TypeID == "" ||
		(f.Outcome != OutcomeSucceeded && f.Outcome != OutcomeFailed) {
		return RunSummary{}, false
	}
	s = RunSummary{
		RunID: runID, TypeID: f.TypeID, Pack: f.Pack, Outcome: f.Outcome,
		StartedAt: f.StartedAt, FinishedAt: f.FinishedAt, IdempotencyKey: f.IdempotencyKey,
		ReplayOf: f.ReplayOf, Owner: f.Owner,
	}
	if f.Outcome == OutcomeFailed && f.Error != nil {
		s.ErrorCode = f.Error.Code
	}
	if f.Invocations != nil {
		s.Calls = len(f.Invocations.Calls)
	}
	return s, true
}

// summaryCache keeps the summaries of the record files of one runs
// directory, each under its file name with the size and modification time
// it was read at, so that a listing decodes only the files written (or
// rewritten) since the last. Entries of files no longer on disk are
// dropped at each listing, so it never holds more than the directory.
type summaryCache struct {
	mu      sync.Mutex
	entries map[string]cachedSummary
}

type cachedSummary struct {
	size    int64
	modTime time.Time
	summary RunSummary
}

func newSummaryCache() *summaryCache {
	return &summaryCache{entries: map[string]cachedSummary{}}
}

func (c *summaryCache) get(name string, info fs.FileInfo) (RunSummary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[name]
	if !ok || e.size != info.Size() || !e.modTime.Equal(info.ModTime()) {
		return RunSummary{}, false
	}
	return e.summary, true
}

func (c *summaryCache) put(name string, info fs.FileInfo, s RunSummary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[name] = cachedSummary{size: info.Size(), modTime: info.ModTime(), summary: s}
}

// keepOnly drops the entries of files not in names.
func (c *summaryCache) keepOnly(names map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.entries {
		if !names[name] {
			delete(c.entries, name)
		}
	}
}

// len is how many summaries the cache holds.
func (c *summaryCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// list reads the summaries of the records in the directory, from the
// cache where a file is unchanged, and returns at most n of those f
// selects after the cursor, in the listing's order. Temporary files, the
// tombstones' directory and names that are no run id's are skipped; a
// file removed meanwhile (by pruning) is left out, and one that cannot be
// read is listed as OutcomeUnreadable.
func (f *fileRunRecords) list(ctx context.Context, filter *RunFilter, after *runCursor, n int) ([]RunSummary, error) {
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list run records: %w", err)
	}
	cache := f.cache
	if cache == nil {
		cache = newSummaryCache()
	}
	seen := make(map[string]bool, len(entries))
	var out []RunSummary
	for i, e := range entries {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if e.IsDir() || strings.HasPrefix(name, atomicfile.TempPrefix) || !ok || !IsRunID(id) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list run records: %w", err)
		}
		seen[name] = true
		s, ok := cache.get(name, info)
		if !ok {
			if s, ok = f.summarizeFile(id, info); !ok {
				continue
			}
			cache.put(name, info, s)
		}
		if filter.matches(&s) && after.before(&s) {
			out = append(out, s)
		}
	}
	cache.keepOnly(seen)
	slices.SortFunc(out, func(a, b RunSummary) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.RunID, a.RunID)
	})
	return out[:min(n, len(out))], nil
}

// summarizeFile reads and checks the record of id, whose file info is
// info; ok is false when the file went meanwhile.
func (f *fileRunRecords) summarizeFile(id string, info fs.FileInfo) (RunSummary, bool) {
	data, err := readRunRecordIn(f.dir, id)
	if errors.Is(err, fs.ErrNotExist) {
		return RunSummary{}, false
	}
	if err == nil {
		var rec *RunRecord
		if rec, err = parseRunRecord(data, id); err == nil {
			return summarize(id, rec), true
		}
	}
	return RunSummary{RunID: id, Outcome: OutcomeUnreadable, StartedAt: info.ModTime().UTC()}, true
}

// list selects, filters and pages in SQL over the columns put fills
// (migration 004), by keyset on (started_at, run_id), which the index
// run_records_listing serves.
func (p *pgRunRecords) list(ctx context.Context, filter *RunFilter, after *runCursor, n int) ([]RunSummary, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	for _, c := range []struct{ column, value string }{
		{"type_id", filter.TypeID}, {"outcome", filter.Outcome}, {"error_code", filter.ErrorCode},
		{"idempotency_key", filter.IdempotencyKey},
	} {
		if c.value != "" {
			where = append(where, c.column+" = "+arg(c.value))
		}
	}
	if !filter.AllOwners {
		where = append(where, "owner = "+arg(filter.Owner))
	}
	if !filter.Since.IsZero() {
		where = append(where, "started_at >= "+arg(filter.Since))
	}
	if !filter.Until.IsZero() {
		where = append(where, "started_at < "+arg(filter.Until))
	}
	if after != nil {
		where = append(where, "(started_at, run_id) < ("+arg(after.startedAt)+", "+arg(after.runID)+")")
	}
	query := `SELECT run_id, COALESCE(type_id, ''), COALESCE(pack, ''), outcome, COALESCE(error_code, ''),
		started_at, COALESCE(finished_at, '0001-01-01 00:00:00+00'), COALESCE(idempotency_key, ''), COALESCE(replay_of, ''), owner, COALESCE(calls, 0)
		FROM run_records`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY started_at DESC, run_id DESC LIMIT " + arg(n)
	rows, err := p.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list run records: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RunSummary, error) {
		var s RunSummary
		err := r.Scan(&s.RunID, &s.TypeID, &s.Pack, &s.Outcome, &s.ErrorCode, &s.StartedAt, &s.FinishedAt,
			&s.IdempotencyKey, &s.ReplayOf, &s.Owner, &s.Calls)
		s.StartedAt, s.FinishedAt = s.StartedAt.UTC(), s.FinishedAt.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list run records: %w", err)
	}
	return out, nil
}
