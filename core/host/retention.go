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

	"github.com/wophost/wophost/internal/atomicfile"
)

// flushInterval is how often outcomes that could not be written are
// tried again.
const flushInterval = 2 * time.Second

// staleTempAge is how old a temporary file in the runs directory must be
// before pruning takes it for the leftover of an interrupted write.
const staleTempAge = time.Hour

// maintain prunes at once and every retention interval, and writes
// unsaved idempotency outcomes every flushInterval, until ctx ends.
func (s *state) maintain(ctx context.Context) {
	s.prune(ctx)
	prune := time.NewTicker(s.retention.Interval)
	defer prune.Stop()
	flush := time.NewTicker(flushInterval)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			s.prune(ctx)
		case <-flush.C:
			s.flush(ctx)
		}
	}
}

// prune applies the retention settings to the run records and the
// idempotency store once.
func (s *state) prune(ctx context.Context) {
	now := time.Now()
	r := s.retention
	records, err := s.runRecords(ctx)
	if err != nil {
		s.logger.Warn("run records not pruned: the store cannot be opened", "error", err)
	} else {
		removed, kept, err := records.prune(ctx, now, r.RunRecords, r.MaxRunRecords, s.inFlight)
		s.report(StoreRunRecords, removed, kept, err)
	}
	if ctx.Err() != nil {
		return
	}
	store, err := s.idempotencyStore()
	if err != nil {
		s.logger.Warn("idempotency keys not pruned: the store cannot be opened", "error", err)
		return
	}
	removed, kept, err := store.Prune(ctx, now, r.IdempotencyKeys)
	if err == nil {
		s.setKeys(kept)
	}
	s.report(StoreIdempotencyKeys, removed, kept, err)
}

func (s *state) report(store string, removed, kept int, err error) {
	if removed > 0 {
		if o := s.observer(); o != nil {
			o.Pruned(store, removed)
		}
		s.logger.Info("pruned", "store", store, "removed", removed, "kept", kept)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.Warn("pruning did not finish; it is tried again at the next interval", "store", store, "error", err)
	}
}

// pruneRunRecords deletes, oldest first, the run records in dir older
// than maxAge and then as many more as it takes to keep at most maxCount,
// but never the record of a run inFlight reports. A record's age is its
// file's modification time: a record is written once, when its run
// finishes. Each record deleted leaves a tombstone under dir/ExpiredDir,
// made durable before the record goes, and the tombstones are then
// bounded by the same maxAge and maxCount (pruneFileTombstones). Each
// record is one file removed whole, so an interrupted pruning leaves
// whole records. It returns how many records it removed and how many it
// kept; a missing dir holds none.
func pruneRunRecords(ctx context.Context, dir string, now time.Time, maxAge time.Duration, maxCount int, inFlight func(runID string) bool) (removed, kept int, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("prune run records: %w", err)
	}
	type record struct {
		id   string
		name string
		mod  time.Time
	}
	records := make([]record, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.HasPrefix(name, atomicfile.TempPrefix) {
			if now.Sub(info.ModTime()) > staleTempAge {
				_ = os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !strings.HasPrefix(id, "run_") {
			continue
		}
		records = append(records, record{id: id, name: name, mod: info.ModTime()})
	}
	slices.SortFunc(records, func(a, b record) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	var doomed []record
	excess := len(records) - maxCount
	for _, r := range records {
		if now.Sub(r.mod) <= maxAge && excess <= 0 {
			break // every record from here on is younger and within the count
		}
		if inFlight != nil && inFlight(r.id) {
			continue
		}
		doomed = append(doomed, r)
		excess--
	}
	ids := make([]string, len(doomed))
	for i, r := range doomed {
		ids[i] = r.id
	}
	if err := writeFileTombstones(dir, ids, now); err != nil {
		return 0, len(records), fmt.Errorf("prune run records: %w", err)
	}
	// gone counts records another host pruned meanwhile: not removed
	// here, no longer kept either.
	gone := 0
	for _, r := range doomed {
		if err := ctx.Err(); err != nil {
			return removed, len(records) - removed - gone, err
		}
		switch err := os.Remove(filepath.Join(dir, r.name)); {
		case err == nil:
			removed++
		case errors.Is(err, fs.ErrNotExist):
			gone++
		default:
			return removed, len(records) - removed - gone, fmt.Errorf("prune run record %s: %w", r.name, err)
		}
	}
	kept = len(records) - removed - gone
	if removed > 0 {
		if err := atomicfile.SyncDir(dir); err != nil {
			return removed, kept, fmt.Errorf("prune run records: %w", err)
		}
	}
	if _, err := pruneFileTombstones(ctx, dir, now, maxAge, maxCount); err != nil {
		return removed, kept, fmt.Errorf("prune run records: %w", err)
	}
	return removed, kept, nil
}
