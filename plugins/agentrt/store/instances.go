package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// Instance is a spawned agent instance.
type Instance struct {
	ID             string
	ManifestID     string
	ManifestDigest string
	// Manifest is the canonical JSON of the manifest the instance runs.
	Manifest []byte
	// Config is the spawn config as sent, or nil.
	Config    []byte
	SpawnedAt time.Time
}

// NewInstance is what CreateInstance records.
type NewInstance struct {
	ManifestID     string
	ManifestDigest string
	Manifest       []byte
	Config         []byte
	// IdempotencyKey identifies the spawn request; RequestDigest is a
	// digest of its content, so that a reused key with a different
	// request is recognised.
	IdempotencyKey string
	RequestDigest  string
}

// CreateInstance records a new instance, unless one was already spawned
// with the same idempotency key: then that one is returned with created
// false, or ErrIdempotencyMismatch if its request digest differs. quota
// bounds the number of instances; at the bound it returns ErrSpawnQuota.
// quota <= 0 means no bound.
func (s *Store) CreateInstance(ctx context.Context, in NewInstance, quota int) (inst Instance, created bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var digest string
		existing, err := scanInstance(tx.QueryRowContext(ctx, instanceSelect+` WHERE idempotency_key = ?`, in.IdempotencyKey), &digest)
		switch {
		case err == nil:
			if digest != in.RequestDigest {
				return fmt.Errorf("spawn key %q: %w", in.IdempotencyKey, ErrIdempotencyMismatch)
			}
			inst = existing
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if quota > 0 {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM instances`).Scan(&n); err != nil {
				return fmt.Errorf("count instances: %w", err)
			}
			if n >= quota {
				return fmt.Errorf("%d instances exist, the quota is %d: %w", n, quota, ErrSpawnQuota)
			}
		}
		inst = Instance{
			ID: NewID("agt_"), ManifestID: in.ManifestID, ManifestDigest: in.ManifestDigest,
			Manifest: in.Manifest, Config: in.Config, SpawnedAt: fromMillis(s.now().UnixMilli()),
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO instances
			(id, manifest_id, manifest_digest, manifest, config, idempotency_key, request_digest, spawned_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			inst.ID, inst.ManifestID, inst.ManifestDigest, inst.Manifest, nullBytes(inst.Config),
			in.IdempotencyKey, in.RequestDigest, inst.SpawnedAt.UnixMilli()); err != nil {
			return fmt.Errorf("insert instance: %w", err)
		}
		created = true
		return nil
	})
	return inst, created, err
}

// Instance returns the instance with the given id, or ErrNotFound.
func (s *Store) Instance(ctx context.Context, id string) (Instance, error) {
	var digest string
	inst, err := scanInstance(s.db.QueryRowContext(ctx, instanceSelect+` WHERE id = ?`, id), &digest)
	if err != nil {
		return Instance{}, fmt.Errorf("agent instance %q: %w", id, err)
	}
	return inst, nil
}

const instanceSelect = `SELECT id, manifest_id, manifest_digest, manifest, config, request_digest, spawned_at FROM instances`

func scanInstance(row *sql.Row, requestDigest *string) (Instance, error) {
	var inst Instance
	var spawned int64
	err := row.Scan(&inst.ID, &inst.ManifestID, &inst.ManifestDigest, &inst.Manifest, &inst.Config, requestDigest, &spawned)
	if errors.Is(err, sql.ErrNoRows) {
		return Instance{}, ErrNotFound
	}
	if err != nil {
		return Instance{}, fmt.Errorf("read instance: %w", err)
	}
	inst.SpawnedAt = fromMillis(spawned)
	return inst, nil
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// LatestInstanceOf returns the id of the most recently spawned instance of
// the manifest id, or ErrNotFound.
func (s *Store) LatestInstanceOf(ctx context.Context, manifestID string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT id FROM instances WHERE manifest_id = ? ORDER BY spawned_at DESC, rowid DESC LIMIT 1`, manifestID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("instance of %q: %w", manifestID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("look up instance of %q: %w", manifestID, err)
	}
	return id, nil
}

// InstanceState is an instance as the operator sees it: its record, and
// the work that waits for it or runs in it.
type InstanceState struct {
	ID             string
	ManifestID     string
	ManifestDigest string
	SpawnedAt      time.Time
	// Queued counts the messages in its mailbox, claimed or not: what its
	// mailbox capacity bounds.
	Queued int
	// Working counts its tasks in TaskWorking.
	Working int
}

// InstancePage is one page of ListInstances.
type InstancePage struct {
	// Instances are in spawn order: by spawn time, then by id.
	Instances []InstanceState
	// Next is the after of the next page, "" when this page is the last.
	Next string
	// Total counts every instance of the store.
	Total int
}

// instancePageQuery reads the page after the key (spawned_at, id) in spawn
// order, each instance with its queued messages and working tasks; the
// two counts are served by the mailbox and task-status indexes. Its
// arguments are stateQueued, TaskWorking, the key's time twice, its id,
// and the limit. pgInstancePageQuery is the same for PostgreSQL.
const instancePageQuery = `SELECT i.id, i.manifest_id, i.manifest_digest, i.spawned_at,
		(SELECT COUNT(*) FROM messages m WHERE m.to_instance = i.id AND m.state = ?),
		(SELECT COUNT(*) FROM tasks t WHERE t.instance_id = i.id AND t.status = ?)
	FROM instances i
	WHERE i.spawned_at > ? OR (i.spawned_at = ? AND i.id > ?)
	ORDER BY i.spawned_at, i.id
	LIMIT ?`

// firstPageKey is a key before every instance: spawn times are Unix
// milliseconds, never this small, and every id is after "".
const firstPageKey = math.MinInt64

// ListInstances returns up to limit instances in spawn order, those after
// the instance after ("" for the first page). An after that names no
// instance is ErrNotFound; limit must be positive. It only reads.
func (s *Store) ListInstances(ctx context.Context, after string, limit int) (InstancePage, error) {
	if limit <= 0 {
		return InstancePage{}, fmt.Errorf("list instances: limit %d is not positive", limit)
	}
	var page InstancePage
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM instances`).Scan(&page.Total); err != nil {
		return InstancePage{}, fmt.Errorf("count instances: %w", err)
	}
	var at int64 = firstPageKey
	if after != "" {
		err := s.db.QueryRowContext(ctx, `SELECT spawned_at FROM instances WHERE id = ?`, after).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return InstancePage{}, fmt.Errorf("list instances after %q: %w", after, ErrNotFound)
		}
		if err != nil {
			return InstancePage{}, fmt.Errorf("list instances after %q: %w", after, err)
		}
	}
	// One more than the page, to learn whether another page follows.
	rows, err := s.db.QueryContext(ctx, instancePageQuery, stateQueued, TaskWorking, at, at, after, limit+1)
	if err != nil {
		return InstancePage{}, fmt.Errorf("list instances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st InstanceState
		var spawned int64
		if err := rows.Scan(&st.ID, &st.ManifestID, &st.ManifestDigest, &spawned, &st.Queued, &st.Working); err != nil {
			return InstancePage{}, fmt.Errorf("list instances: %w", err)
		}
		st.SpawnedAt = fromMillis(spawned)
		page.Instances = append(page.Instances, st)
	}
	if err := rows.Err(); err != nil {
		return InstancePage{}, fmt.Errorf("list instances: %w", err)
	}
	return page.trim(limit), nil
}

// trim cuts a page read with one row more than limit down to limit, and
// sets Next when that row was there.
func (p InstancePage) trim(limit int) InstancePage {
	if len(p.Instances) > limit {
		p.Instances = p.Instances[:limit]
		p.Next = p.Instances[limit-1].ID
	}
	return p
}
