package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
