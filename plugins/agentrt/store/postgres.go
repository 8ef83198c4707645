package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
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

// Postgres is the runtime's store in a PostgreSQL schema that every host
// with the same config shares. Each guard the embedded store gets from
// its single writer is taken in the database instead:
//
//   - spawns count and insert under one transaction-scoped advisory lock
//     per schema, so the quota holds for all hosts together; the unique
//     spawn key makes a second instance for one key impossible;
//   - a sender locks the recipient's instance row, so the capacity check
//     and the insert are atomic per mailbox; the unique (mailbox, key)
//     pair makes a second message for one key impossible;
//   - Claim takes messages with FOR UPDATE SKIP LOCKED, so two hosts
//     never take one message at once, and a message whose lease has
//     ended is claimable again: there is no release of every claim at
//     start, which would take live claims from other hosts;
//   - each store holds a session advisory lock on its owner id while it
//     is open; at open, tasks left working by an owner whose lock is free
//     (a host that is gone) are interrupted.
//
// Times come from Options.Now of each host, so hosts' clocks must agree
// to well within a lease.
type Postgres struct {
	pool *pgxpool.Pool
	// owner names this store in the claims and tasks it takes.
	owner string
	// ownerConn holds the owner's advisory lock for the store's life.
	ownerConn *pgx.Conn
	now       func() time.Time
}

// OpenPostgres returns the store over pool, whose connections have
// search_path set to the store's schema and the migrations applied
// (pgstore.Open), and interrupts the tasks of hosts that are gone. The
// store closes pool on Close. Options.BusyTimeout is not used: the
// pool's statement_timeout bounds waits.
func OpenPostgres(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Postgres, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	p := &Postgres{pool: pool, owner: NewID("own_"), now: now}
	// A connection of its own: the lock must outlive any pooled one.
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("agent store: connect to hold the owner lock: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, p.owner); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("agent store: take the owner lock: %w", err)
	}
	p.ownerConn = conn
	if err := p.recover(ctx); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return p, nil
}

// Close releases the owner lock and closes the pool.
func (p *Postgres) Close() error {
	err := p.ownerConn.Close(context.Background())
	p.pool.Close()
	return err
}

// recover interrupts the tasks left working by owners that no longer
// hold their lock. pg_try_advisory_xact_lock succeeds only for those; the
// locks it takes end with the transaction.
func (p *Postgres) recover(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `UPDATE tasks SET status = $1, updated_at = $2
		WHERE status = $3 AND owner IN (
			SELECT o FROM (SELECT DISTINCT owner AS o FROM tasks WHERE status = $3) w
			WHERE pg_try_advisory_xact_lock(hashtextextended(o, 0)))`,
		TaskInterrupted, p.now().UnixMilli(), TaskWorking)
	if err != nil {
		return fmt.Errorf("agent store: interrupt the tasks of hosts that are gone: %w", err)
	}
	return nil
}

// CreateInstance implements Backend with Store.CreateInstance's rules.
// With a quota, every spawn of every host queues on one advisory lock of
// the schema, so that counting and inserting are one step.
func (p *Postgres) CreateInstance(ctx context.Context, in NewInstance, quota int) (inst Instance, created bool, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if quota > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.spawn_quota'))`); err != nil {
				return fmt.Errorf("lock the spawn quota: %w", err)
			}
		}
		existing, found, err := p.instanceByKey(ctx, tx, in)
		if err != nil || found {
			inst = existing
			return err
		}
		if quota > 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM instances`).Scan(&n); err != nil {
				return fmt.Errorf("count instances: %w", err)
			}
			if n >= quota {
				return fmt.Errorf("%d instances exist, the quota is %d: %w", n, quota, ErrSpawnQuota)
			}
		}
		inst = Instance{
			ID: NewID("agt_"), ManifestID: in.ManifestID, ManifestDigest: in.ManifestDigest,
			Manifest: in.Manifest, Config: in.Config, SpawnedAt: fromMillis(p.now().UnixMilli()),
		}
		tag, err := tx.Exec(ctx, `INSERT INTO instances
			(id, manifest_id, manifest_digest, manifest, config, idempotency_key, request_digest, spawned_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (idempotency_key) DO NOTHING`,
			inst.ID, inst.ManifestID, inst.ManifestDigest, inst.Manifest, nullBytes(inst.Config),
			in.IdempotencyKey, in.RequestDigest, inst.SpawnedAt.UnixMilli())
		if err != nil {
			return fmt.Errorf("insert instance: %w", err)
		}
		if tag.RowsAffected() == 0 {
			// Another host committed this key first (possible without a
			// quota, which is what serialises spawns): answer with its
			// instance.
			existing, _, err := p.instanceByKey(ctx, tx, in)
			inst = existing
			return err
		}
		created = true
		return nil
	})
	return inst, created, err
}

// instanceByKey returns the instance spawned with in's key, if any, or
// ErrIdempotencyMismatch when its request differs.
func (p *Postgres) instanceByKey(ctx context.Context, tx pgx.Tx, in NewInstance) (Instance, bool, error) {
	var digest string
	inst, err := scanPgInstance(tx.QueryRow(ctx, pgInstanceSelect+` WHERE idempotency_key = $1`, in.IdempotencyKey), &digest)
	switch {
	case errors.Is(err, ErrNotFound):
		return Instance{}, false, nil
	case err != nil:
		return Instance{}, false, err
	case digest != in.RequestDigest:
		return Instance{}, false, fmt.Errorf("spawn key %q: %w", in.IdempotencyKey, ErrIdempotencyMismatch)
	}
	return inst, true, nil
}

const pgInstanceSelect = `SELECT id, manifest_id, manifest_digest, manifest, config, request_digest, spawned_at FROM instances`

func scanPgInstance(row pgx.Row, requestDigest *string) (Instance, error) {
	var inst Instance
	var spawned int64
	err := row.Scan(&inst.ID, &inst.ManifestID, &inst.ManifestDigest, &inst.Manifest, &inst.Config, requestDigest, &spawned)
	if errors.Is(err, pgx.ErrNoRows) {
		return Instance{}, ErrNotFound
	}
	if err != nil {
		return Instance{}, fmt.Errorf("read instance: %w", err)
	}
	inst.SpawnedAt = fromMillis(spawned)
	return inst, nil
}

// Instance implements Backend.
func (p *Postgres) Instance(ctx context.Context, id string) (Instance, error) {
	var digest string
	inst, err := scanPgInstance(p.pool.QueryRow(ctx, pgInstanceSelect+` WHERE id = $1`, id), &digest)
	if err != nil {
		return Instance{}, fmt.Errorf("agent instance %q: %w", id, err)
	}
	return inst, nil
}

// LatestInstanceOf implements Backend.
func (p *Postgres) LatestInstanceOf(ctx context.Context, manifestID string) (string, error) {
	var id string
	err := p.pool.QueryRow(ctx, `SELECT id FROM instances WHERE manifest_id = $1 ORDER BY spawned_at DESC, seq DESC LIMIT 1`, manifestID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("instance of %q: %w", manifestID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("look up instance of %q: %w", manifestID, err)
	}
	return id, nil
}

// StartTask implements Backend. The task is this store's: should its host
// go, the next store opened on the schema interrupts it.
func (p *Postgres) StartTask(ctx context.Context, id, kind, instanceID, status string, input []byte) error {
	now := p.now().UnixMilli()
	_, err := p.pool.Exec(ctx, `INSERT INTO tasks (id, kind, instance_id, status, input, owner, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`, id, kind, instanceID, status, nullBytes(input), p.owner, now)
	if err != nil {
		return fmt.Errorf("record task %s: %w", id, err)
	}
	return nil
}

// FinishTask implements Backend.
func (p *Postgres) FinishTask(ctx context.Context, id, status string, output, errJSON []byte) error {
	tag, err := p.pool.Exec(ctx, `UPDATE tasks SET status = $1, output = $2, error = $3, updated_at = $4 WHERE id = $5`,
		status, nullBytes(output), nullBytes(errJSON), p.now().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("finish task %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("finish task %s: %w", id, ErrNotFound)
	}
	return nil
}

// Task implements Backend.
func (p *Postgres) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	var created, updated int64
	err := p.pool.QueryRow(ctx, `SELECT id, kind, instance_id, status, input, output, error, created_at, updated_at
		FROM tasks WHERE id = $1`, id).Scan(&t.ID, &t.Kind, &t.InstanceID, &t.Status, &t.Input, &t.Output, &t.Error, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return Task{}, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("read task %q: %w", id, err)
	}
	t.CreatedAt, t.UpdatedAt = fromMillis(created), fromMillis(updated)
	return t, nil
}

// InFlight implements Backend, counting the work of every host.
func (p *Postgres) InFlight(ctx context.Context, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	for _, id := range ids {
		out[id] = 0
	}
	rows, err := p.pool.Query(ctx, `
		SELECT instance_id, count(*) FROM tasks WHERE instance_id = ANY($1) AND status = $2 GROUP BY instance_id
		UNION ALL
		SELECT to_instance, count(*) FROM messages WHERE to_instance = ANY($1) AND state = $3 GROUP BY to_instance`,
		ids, TaskWorking, stateQueued)
	if err != nil {
		return nil, fmt.Errorf("count work in flight: %w", err)
	}
	var id string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] += n; return nil }); err != nil {
		return nil, fmt.Errorf("count work in flight: %w", err)
	}
	return out, nil
}

// Enqueue implements Backend with Store.Enqueue's rules. The sender locks
// the recipient's instance row, so that senders to one mailbox, on any
// host, count and insert one at a time.
func (p *Postgres) Enqueue(ctx context.Context, m NewMessage, capacity int) (msg Message, duplicate bool, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// NO KEY: the lock must not block inserting tasks and messages
		// that reference the instance.
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM instances WHERE id = $1 FOR NO KEY UPDATE`, m.To).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("recipient %q: %w", m.To, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("look up recipient %q: %w", m.To, err)
		}
		existing, found, err := messageByKey(ctx, tx, m)
		if err != nil || found {
			msg, duplicate = existing, found
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM messages WHERE to_instance = $1 AND state = $2`, m.To, stateQueued).Scan(&n); err != nil {
			return fmt.Errorf("count mailbox of %s: %w", m.To, err)
		}
		if capacity > 0 && n >= capacity {
			return fmt.Errorf("mailbox of %s holds %d messages, its capacity: %w", m.To, n, ErrMailboxFull)
		}
		msg = Message{
			ID: NewID("msg_"), To: m.To, From: m.From, Channel: m.Channel, Content: m.Content,
			IdempotencyKey: m.IdempotencyKey, SentAt: fromMillis(p.now().UnixMilli()),
		}
		err = tx.QueryRow(ctx, `INSERT INTO messages
			(id, to_instance, from_agent, channel, content, idempotency_key, request_digest, sent_at, state)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (to_instance, idempotency_key) DO NOTHING RETURNING seq`,
			msg.ID, msg.To, msg.From, msg.Channel, msg.Content, msg.IdempotencyKey, m.RequestDigest, msg.SentAt.UnixMilli(), stateQueued).Scan(&msg.Seq)
		if errors.Is(err, pgx.ErrNoRows) {
			// The key was committed by a sender the lock did not order
			// before this one: the constraint kept it single.
			msg, duplicate, err = messageByKey(ctx, tx, m)
			if err == nil && !duplicate {
				err = fmt.Errorf("message key %q to %s conflicts but cannot be read", m.IdempotencyKey, m.To)
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("insert message: %w", err)
		}
		return nil
	})
	return msg, duplicate, err
}

// messageByKey returns the message sent to m.To with m's key, if any, or
// ErrIdempotencyMismatch when its request differs.
func messageByKey(ctx context.Context, tx pgx.Tx, m NewMessage) (Message, bool, error) {
	var digest string
	row := tx.QueryRow(ctx, pgMessageSelect+`, request_digest FROM messages WHERE to_instance = $1 AND idempotency_key = $2`, m.To, m.IdempotencyKey)
	existing, err := scanPgMessage(row, &digest)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Message{}, false, nil
	case err != nil:
		return Message{}, false, fmt.Errorf("look up message key: %w", err)
	case digest != m.RequestDigest:
		return Message{}, false, fmt.Errorf("message key %q to %s: %w", m.IdempotencyKey, m.To, ErrIdempotencyMismatch)
	}
	return existing, true, nil
}

const pgMessageSelect = `SELECT seq, id, to_instance, from_agent, channel, content, idempotency_key, sent_at, attempts`

func scanPgMessage(row pgx.Row, extra ...any) (Message, error) {
	var m Message
	var sent int64
	dst := append([]any{&m.Seq, &m.ID, &m.To, &m.From, &m.Channel, &m.Content, &m.IdempotencyKey, &sent, &m.Attempts}, extra...)
	if err := row.Scan(dst...); err != nil {
		return Message{}, err
	}
	m.SentAt = fromMillis(sent)
	return m, nil
}

// Claim implements Backend. Rows another host is claiming at this moment
// are skipped rather than waited for (SKIP LOCKED), and each row is
// claimed by the statement that locked it, so no message is taken twice.
// A message whose lease has ended is claimable again, whoever held it.
func (p *Postgres) Claim(ctx context.Context, to string, max int, lease time.Duration) ([]Message, error) {
	now := p.now().UnixMilli()
	var limit *int
	if max > 0 {
		limit = &max
	}
	rows, err := p.pool.Query(ctx, `WITH free AS (
			SELECT seq FROM messages
			WHERE to_instance = $1 AND state = $2 AND (claimed_until IS NULL OR claimed_until <= $3)
			ORDER BY seq LIMIT $4
			FOR UPDATE SKIP LOCKED)
		UPDATE messages m SET claimed_until = $5, claimed_by = $6, attempts = m.attempts + 1
		FROM free WHERE m.seq = free.seq
		RETURNING m.seq, m.id, m.to_instance, m.from_agent, m.channel, m.content, m.idempotency_key, m.sent_at, m.attempts`,
		to, stateQueued, now, limit, now+lease.Milliseconds(), p.owner)
	if err != nil {
		return nil, fmt.Errorf("claim from the mailbox of %s: %w", to, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) { return scanPgMessage(r) })
	if err != nil {
		return nil, fmt.Errorf("claim from the mailbox of %s: %w", to, err)
	}
	slices.SortFunc(out, func(a, b Message) int { return int(a.Seq - b.Seq) })
	return out, nil
}

// Ack implements Backend. Only messages this store still holds are
// marked: one whose lease ended and that another host claimed since is
// that host's to acknowledge.
func (p *Postgres) Ack(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := p.pool.Exec(ctx, `UPDATE messages SET state = $1, claimed_until = NULL, claimed_by = NULL, delivered_at = $2
		WHERE id = ANY($3) AND state = $4 AND claimed_by = $5`, stateDelivered, p.now().UnixMilli(), ids, stateQueued, p.owner)
	if err != nil {
		return fmt.Errorf("set %d messages %s: %w", len(ids), stateDelivered, err)
	}
	return nil
}

// Release implements Backend, for the messages this store still holds.
func (p *Postgres) Release(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := p.pool.Exec(ctx, `UPDATE messages SET claimed_until = NULL, claimed_by = NULL
		WHERE id = ANY($1) AND state = $2 AND claimed_by = $3`, ids, stateQueued, p.owner)
	if err != nil {
		return fmt.Errorf("set %d messages %s: %w", len(ids), stateQueued, err)
	}
	return nil
}

// Queued implements Backend.
func (p *Postgres) Queued(ctx context.Context, to string) (int, error) {
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE to_instance = $1 AND state = $2`, to, stateQueued).Scan(&n); err != nil {
		return 0, fmt.Errorf("count mailbox of %s: %w", to, err)
	}
	return n, nil
}

// pgInstancePageQuery is instancePageQuery with PostgreSQL's placeholders.
const pgInstancePageQuery = `SELECT i.id, i.manifest_id, i.manifest_digest, i.spawned_at,
		(SELECT count(*) FROM messages m WHERE m.to_instance = i.id AND m.state = $1),
		(SELECT count(*) FROM tasks t WHERE t.instance_id = i.id AND t.status = $2)
	FROM instances i
	WHERE i.spawned_at > $3 OR (i.spawned_at = $3 AND i.id > $4)
	ORDER BY i.spawned_at, i.id
	LIMIT $5`

// ListInstances implements Backend with Store.ListInstances's rules,
// over the instances of every host. The count and the page are read in
// one read-only snapshot, so that they agree while other hosts spawn.
func (p *Postgres) ListInstances(ctx context.Context, after string, limit int) (InstancePage, error) {
	if limit <= 0 {
		return InstancePage{}, fmt.Errorf("list instances: limit %d is not positive", limit)
	}
	var page InstancePage
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM instances`).Scan(&page.Total); err != nil {
			return fmt.Errorf("count instances: %w", err)
		}
		var at int64 = firstPageKey
		if after != "" {
			err := tx.QueryRow(ctx, `SELECT spawned_at FROM instances WHERE id = $1`, after).Scan(&at)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("list instances after %q: %w", after, ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("list instances after %q: %w", after, err)
			}
		}
		// One more than the page, to learn whether another page follows.
		rows, err := tx.Query(ctx, pgInstancePageQuery, stateQueued, TaskWorking, at, after, limit+1)
		if err != nil {
			return fmt.Errorf("list instances: %w", err)
		}
		page.Instances, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (InstanceState, error) {
			var st InstanceState
			var spawned int64
			err := r.Scan(&st.ID, &st.ManifestID, &st.ManifestDigest, &spawned, &st.Queued, &st.Working)
			st.SpawnedAt = fromMillis(spawned)
			return st, err
		})
		if err != nil {
			return fmt.Errorf("list instances: %w", err)
		}
		return nil
	})
	if err != nil {
		return InstancePage{}, err
	}
	return page.trim(limit), nil
}
