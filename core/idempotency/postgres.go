package idempotency

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wophost/wophost/internal/pgstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the numbered migrations that create the PostgreSQL
// store's table, for pgstore.Open.
func Migrations() fs.FS { return pgstore.MigrationsDir(migrationFiles) }

// claimAttempts bounds how often Claim tries again when the record that
// held the key was released between its insert and its read.
const claimAttempts = 8

// liveSQL is Record.Live of the row r at $now with the retention $ttl
// (microseconds), in SQL.
const liveSQL = `((r.state = 'pending' AND @now < r.lease_until) OR
	(r.state = 'done' AND @now < r.completed_at + @ttl * interval '1 microsecond'))`

// PostgresStore is the Store of the postgres storage backend: one row per
// key in the table idempotency_records, shared by every host on the
// database. Claim is one INSERT … ON CONFLICT that replaces only a row
// that is not live, so of concurrent claims through any number of hosts
// exactly one is inserted; Complete and Release are one UPDATE or DELETE
// conditional on the pending state and the owner. It is a Leaser: Renew
// moves the lease_until column of its host's claims, and Get reads a
// claim's lease from that column. Each statement commits before it
// answers.
type PostgresStore struct {
	pool *pgxpool.Pool
}

// NewPostgresStore returns the store over pool, whose search_path names a
// schema with Migrations applied (pgstore.Open). The caller closes pool.
func NewPostgresStore(pool *pgxpool.Pool) *PostgresStore {
	return &PostgresStore{pool: pool}
}

func ttlMicros(ttl time.Duration) int64 { return ttl.Microseconds() }

// Get implements Store.
func (s *PostgresStore) Get(ctx context.Context, id string) (*Record, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var data []byte
	var lease time.Time
	err := s.pool.QueryRow(ctx, `SELECT record, lease_until FROM idempotency_records WHERE id = $1`, id).Scan(&data, &lease)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency record: %w", err)
	}
	r, err := decodeRow(id, data)
	if err != nil {
		return nil, err
	}
	// Renew moves the column alone: the record keeps the lease its claim
	// was made with.
	r.LeaseUntil = lease.UTC()
	return r, nil
}

func decodeRow(id string, data []byte) (*Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("idempotency record %s: %w", id, err)
	}
	if r.ID != id || (r.State != StatePending && r.State != StateDone) {
		return nil, fmt.Errorf("idempotency record %s: id or state does not match its row", id)
	}
	return &r, nil
}

// Claim implements Store.
func (s *PostgresStore) Claim(ctx context.Context, claim *Record, now time.Time, ttl time.Duration) (*Record, error) {
	if claim.State != StatePending || claim.Owner == "" {
		return nil, fmt.Errorf("claim of %s: a claim is a pending record with an owner", claim.ID)
	}
	if err := checkID(claim.ID); err != nil {
		return nil, err
	}
	data, err := json.Marshal(claim)
	if err != nil {
		return nil, fmt.Errorf("encode idempotency record: %w", err)
	}
	args := pgx.NamedArgs{"id": claim.ID, "owner": claim.Owner, "lease": claim.LeaseUntil, "record": data, "now": now, "ttl": ttlMicros(ttl)}
	for range claimAttempts {
		// A conflicting row is locked; one that is live is left as it is
		// and read below, one that is not is replaced.
		tag, err := s.pool.Exec(ctx, `INSERT INTO idempotency_records AS r (id, state, owner, lease_until, completed_at, record)
			VALUES (@id, 'pending', @owner, @lease, NULL, @record)
			ON CONFLICT (id) DO UPDATE SET state = 'pending', owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until,
				completed_at = NULL, record = EXCLUDED.record
			WHERE NOT `+liveSQL, args)
		if err != nil {
			return nil, fmt.Errorf("write idempotency claim: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil, nil
		}
		held, err := s.Get(ctx, claim.ID)
		if errors.Is(err, ErrNotFound) {
			continue // released meanwhile: the key is free again
		}
		if err != nil {
			return nil, err
		}
		return held, nil
	}
	return nil, fmt.Errorf("claim of %s: the key changed hands %d times while it was claimed", claim.ID, claimAttempts)
}

// Complete implements Store.
func (s *PostgresStore) Complete(ctx context.Context, done *Record) error {
	if done.State != StateDone {
		return fmt.Errorf("complete %s: the record is not done", done.ID)
	}
	if err := checkID(done.ID); err != nil {
		return err
	}
	data, err := json.Marshal(done)
	if err != nil {
		return fmt.Errorf("encode idempotency record: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE idempotency_records SET state = 'done', completed_at = $3, record = $4
		WHERE id = $1 AND state = 'pending' AND owner = $2`, done.ID, done.Owner, done.CompletedAt, data)
	if err != nil {
		return fmt.Errorf("write idempotency record: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotOwner
	}
	return nil
}

// Renew implements Leaser: one UPDATE of the rows among claims that are
// pending under their owner. A row taken over meanwhile has another
// owner and is left alone; a takeover that waits for the UPDATE's lock
// sees the renewed lease and does not happen.
func (s *PostgresStore) Renew(ctx context.Context, claims []Held, until time.Time) (map[string]bool, error) {
	held := map[string]bool{}
	if len(claims) == 0 {
		return held, nil
	}
	ids, owners := make([]string, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		if err := checkID(c.ID); err != nil {
			return nil, err
		}
		ids[i], owners[i] = c.ID, c.Owner
	}
	rows, err := s.pool.Query(ctx, `UPDATE idempotency_records AS r SET lease_until = greatest(r.lease_until, $3)
		FROM unnest($1::text[], $2::text[]) AS c(id, owner)
		WHERE r.id = c.id AND r.owner = c.owner AND r.state = 'pending'
		RETURNING r.owner`, ids, owners, until)
	if err != nil {
		return nil, fmt.Errorf("renew idempotency claims: %w", err)
	}
	owned, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("renew idempotency claims: %w", err)
	}
	for _, o := range owned {
		held[o] = true
	}
	return held, nil
}

// Release implements Store.
func (s *PostgresStore) Release(ctx context.Context, id, owner string) error {
	if err := checkID(id); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_records WHERE id = $1 AND state = 'pending' AND owner = $2`, id, owner)
	if err != nil {
		return fmt.Errorf("release idempotency claim: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotOwner
	}
	return nil
}

// Prune implements Store: one DELETE of the rows that are not live, so a
// row claimed or completed meanwhile is judged as it is then.
func (s *PostgresStore) Prune(ctx context.Context, now time.Time, ttl time.Duration) (removed, remaining int, err error) {
	// The count of the table sees it as it was before the DELETE.
	err = s.pool.QueryRow(ctx, `WITH gone AS (DELETE FROM idempotency_records AS r WHERE NOT `+liveSQL+` RETURNING 1)
		SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM idempotency_records) - (SELECT count(*) FROM gone)`,
		pgx.NamedArgs{"now": now, "ttl": ttlMicros(ttl)}).Scan(&removed, &remaining)
	if err != nil {
		return 0, 0, fmt.Errorf("prune idempotency store: %w", err)
	}
	return removed, remaining, nil
}
