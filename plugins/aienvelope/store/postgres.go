package store

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
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

// Migrations returns the PostgreSQL store's numbered migrations, for
// pgstore.Open.
func Migrations() fs.FS { return pgstore.MigrationsDir(migrationFiles) }

// claimAttempts bounds Claim's loop: each turn loses only to another
// process inserting or deleting the same key in between two statements,
// or committing it while the claim's statement was running.
const claimAttempts = 5

// claimSQL inserts a pending row, or else returns the row already under
// the key, in one statement: a single round trip and its own transaction.
// The first column says which. The SELECT of the existing row reads the
// statement's snapshot, so a row another transaction committed while the
// INSERT waited for it conflicts and yet is not seen: then no row comes
// back, and Claim runs the statement again on a newer snapshot.
const claimSQL = `WITH ins AS (
		INSERT INTO envelopes (key, digest, id, type, state, async, request, created_at, owner, lease_until)
		VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, now() + $9::bigint * interval '1 microsecond')
		ON CONFLICT (key) DO NOTHING RETURNING ` + pgCols + `)
	SELECT true, ` + pgCols + ` FROM ins
	UNION ALL
	SELECT false, ` + pgCols + ` FROM envelopes WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM ins)`

// PostgresOptions are the settings of a PostgreSQL store.
type PostgresOptions struct {
	// Lease is how long a pending row stays this process's without a
	// renewal.
	Lease time.Duration
	// Handoff records async rows with no owner and a lease already
	// passed, so another process's sweeper runs them: the store of a
	// process that runs no jobs.
	Handoff bool
}

// Postgres is the envelope store in a PostgreSQL schema, shared by every
// host whose config names the same database. The primary key on the
// idempotency key makes one row per key whatever the hosts do at once.
// A pending row carries the owner (a random id of the process that
// claimed or took it over) and the time its lease ends; finishing or
// releasing a row requires still owning it, so a process that lost its
// lease cannot overwrite the result of the one that took the row over.
// Every finish and release is announced with NOTIFY on a channel named
// after the schema.
type Postgres struct {
	pool    *pgxpool.Pool
	schema  string
	owner   string
	opts    PostgresOptions
	channel string
}

// NewPostgres returns the store over pool, whose connections have
// search_path set to schema and the migrations applied (pgstore.Open).
// The store closes pool on Close.
func NewPostgres(pool *pgxpool.Pool, schema string, opts PostgresOptions) *Postgres {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &Postgres{pool: pool, schema: schema, owner: hex.EncodeToString(b[:]), opts: opts, channel: schema}
}

// Owner returns the id this store's rows are owned by.
func (p *Postgres) Owner() string { return p.owner }

// Close implements Backend.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

// lease is the lease as a PostgreSQL interval in microseconds.
func (p *Postgres) lease() int64 { return p.opts.Lease.Microseconds() }

// Claim implements Backend, with the embedded store's rules (Store.Claim),
// across processes: of two claims of one key at once, one inserts and the
// other reads the row the first committed. A new key costs one statement.
func (p *Postgres) Claim(ctx context.Context, e *Envelope) (*Envelope, bool, error) {
	owner, lease := &p.owner, p.lease()
	if e.Async && p.opts.Handoff {
		owner, lease = nil, 0
	}
	for range claimAttempts {
		var claimed bool
		cur, err := scanPG(p.pool.QueryRow(ctx, claimSQL,
			e.Key, e.Digest, e.ID, e.Type, e.Async, e.Request, e.CreatedAt, owner, lease), &claimed)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// The conflicting row was committed after the statement's
			// snapshot, or deleted since: the next turn sees which.
			continue
		case err != nil:
			return nil, false, fmt.Errorf("claim envelope %s: %w", e.ID, err)
		case claimed:
			e.State = StatePending
			return nil, true, nil
		case cur.State != StateFailed || cur.Digest != e.Digest:
			return cur, false, nil
		}
		// A failure is not final for its key: the same request runs again.
		if _, err := p.pool.Exec(ctx, `DELETE FROM envelopes WHERE key = $1 AND id = $2 AND state = 'failed'`, e.Key, cur.ID); err != nil {
			return nil, false, fmt.Errorf("replace failed envelope: %w", err)
		}
	}
	return nil, false, fmt.Errorf("claim envelope %s: key %q changed %d times while claiming", e.ID, e.Key, claimAttempts)
}

// Complete implements Backend; the row must still be this process's.
func (p *Postgres) Complete(ctx context.Context, id string, result []byte, at time.Time) error {
	return p.finish(ctx, id, StateCompleted, result, nil, at)
}

// Fail implements Backend; the row must still be this process's.
func (p *Postgres) Fail(ctx context.Context, id string, errJSON []byte, at time.Time) error {
	return p.finish(ctx, id, StateFailed, nil, errJSON, at)
}

func (p *Postgres) finish(ctx context.Context, id, state string, result, errJSON []byte, at time.Time) error {
	var n int
	err := p.pool.QueryRow(ctx, `WITH done AS (
			UPDATE envelopes SET state = $2, result = $3, error = $4, finished_at = $5, owner = NULL, lease_until = NULL
			WHERE id = $1 AND state = 'pending' AND owner = $6 RETURNING id)
		SELECT count(pg_notify($7, id)) FROM done`,
		id, state, result, errJSON, at, p.owner, p.channel).Scan(&n)
	if err != nil {
		return fmt.Errorf("record %s envelope %s: %w", state, id, err)
	}
	if n == 0 {
		return fmt.Errorf("record %s envelope %s: %w (or not pending, or its lease passed to another process)", state, id, ErrNotFound)
	}
	return nil
}

// Release implements Backend; a row no longer this process's is left alone.
func (p *Postgres) Release(ctx context.Context, id string) error {
	if _, err := p.pool.Exec(ctx, `WITH gone AS (
			DELETE FROM envelopes WHERE id = $1 AND state = 'pending' AND owner = $2 RETURNING id)
		SELECT count(pg_notify($3, id)) FROM gone`, id, p.owner, p.channel); err != nil {
		return fmt.Errorf("release envelope %s: %w", id, err)
	}
	return nil
}

// Get implements Backend.
func (p *Postgres) Get(ctx context.Context, id string) (*Envelope, error) {
	return scanOne(ctx, p.pool, `WHERE id = $1`, id)
}

// Pending implements Backend: every host's pending rows.
func (p *Postgres) Pending(ctx context.Context) ([]*Envelope, error) {
	return p.scanAll(ctx, "list pending envelopes", pgSelect+` WHERE state = 'pending' ORDER BY created_at, id`)
}

// Prune implements Backend, with the embedded store's rules (Store.Prune).
// Rows another process is pruning at the same moment are skipped, not
// waited for.
func (p *Postgres) Prune(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	return pruneBatches(ctx, cutoff, batch, nil, func(ctx context.Context) (int64, error) {
		tag, err := p.pool.Exec(ctx, `DELETE FROM envelopes WHERE key IN (
			SELECT key FROM envelopes WHERE state <> 'pending' AND finished_at < $1
			ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, cutoff, batch)
		return tag.RowsAffected(), err
	})
}

// Renew implements Shared.
func (p *Postgres) Renew(ctx context.Context) error {
	if _, err := p.pool.Exec(ctx, `UPDATE envelopes SET lease_until = now() + $2::bigint * interval '1 microsecond'
		WHERE owner = $1 AND state = 'pending'`, p.owner, p.lease()); err != nil {
		return fmt.Errorf("renew leases: %w", err)
	}
	return nil
}

// Sweep implements Shared. A synchronous row whose lease passed lost its
// caller with its process, and the caller retries with the same key, so
// it is deleted, as the embedded store's process does at start. An async
// row whose lease passed is a job accepted by a process that stopped
// running it: it becomes this process's, the oldest first. SKIP LOCKED
// lets the sweepers of several processes each take different rows.
func (p *Postgres) Sweep(ctx context.Context, limit int) ([]*Envelope, error) {
	if _, err := p.pool.Exec(ctx, `WITH gone AS (
			DELETE FROM envelopes WHERE key IN (
				SELECT key FROM envelopes WHERE state = 'pending' AND NOT async AND lease_until < now()
				ORDER BY created_at LIMIT 100 FOR UPDATE SKIP LOCKED)
			RETURNING id)
		SELECT count(pg_notify($1, id)) FROM gone`, p.channel); err != nil {
		return nil, fmt.Errorf("release expired envelopes: %w", err)
	}
	if limit <= 0 {
		return nil, nil
	}
	return p.scanAll(ctx, "take over expired jobs", `UPDATE envelopes
		SET owner = $1, lease_until = now() + $2::bigint * interval '1 microsecond'
		WHERE key IN (
			SELECT key FROM envelopes WHERE state = 'pending' AND async AND lease_until < now()
			ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		AND state = 'pending' AND lease_until < now()
		RETURNING `+pgCols, p.owner, p.lease(), limit)
}

// Handback implements Shared.
func (p *Postgres) Handback(ctx context.Context) error {
	if _, err := p.pool.Exec(ctx, `UPDATE envelopes SET owner = NULL, lease_until = now()
		WHERE owner = $1 AND state = 'pending' AND async`, p.owner); err != nil {
		return fmt.Errorf("hand back leases: %w", err)
	}
	return nil
}

// Listen implements Shared, on a connection of its own: a listening
// session is held for as long as the process runs, which must not take
// a connection of the pool from the calls.
func (p *Postgres) Listen(ctx context.Context, changed func()) error {
	conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect to listen: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{p.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen on %s: %w", p.channel, err)
	}
	// What finished before LISTEN took effect is not announced to us.
	changed()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notifications on %s: %w", p.channel, err)
		}
		changed()
	}
}

const pgCols = `key, digest, id, type, state, async, request, result, error, created_at, finished_at`

const pgSelect = `SELECT ` + pgCols + ` FROM envelopes`

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func scanOne(ctx context.Context, q querier, where string, args ...any) (*Envelope, error) {
	e, err := scanPG(q.QueryRow(ctx, pgSelect+` `+where, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read envelope: %w", err)
	}
	return e, nil
}

func (p *Postgres) scanAll(ctx context.Context, what, sql string, args ...any) ([]*Envelope, error) {
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Envelope, error) { return scanPG(r) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// scanPG scans a row of pgCols, after the columns lead scans into.
func scanPG(r pgx.Row, lead ...any) (*Envelope, error) {
	var e Envelope
	var finished *time.Time
	if err := r.Scan(append(lead, &e.Key, &e.Digest, &e.ID, &e.Type, &e.State, &e.Async, &e.Request, &e.Result, &e.Error, &e.CreatedAt, &finished)...); err != nil {
		return nil, err
	}
	if finished != nil {
		e.FinishedAt = *finished
	}
	return &e, nil
}
