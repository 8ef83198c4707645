package store

import (
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
	"github.com/wophost/wophost/internal/promptfile"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the PostgreSQL store's numbered migrations, for
// pgstore.Open.
func Migrations() fs.FS { return pgstore.MigrationsDir(migrationFiles) }

// Postgres is the prompt store in a PostgreSQL schema, shared by every
// host whose config names the same database: bodies content-addressed in
// blobs (bytea, the bytes exactly), one immutable row per version in
// versions. A publisher locks its name's row in names, so the versions of
// one name are allocated one publisher at a time across every process,
// and the primary key (name, version) makes a second row for one version
// impossible whatever happens. Reads take no lock and check every body
// against its digest.
type Postgres struct {
	pool   *pgxpool.Pool
	schema string
}

// NewPostgres returns the store over pool, whose connections have
// search_path set to schema and the migrations applied (pgstore.Open).
// The store closes pool on Close.
func NewPostgres(pool *pgxpool.Pool, schema string) *Postgres {
	return &Postgres{pool: pool, schema: schema}
}

// Where implements Backend.
func (p *Postgres) Where() string { return "postgres schema " + p.schema }

// Close implements Backend.
func (p *Postgres) Close() { p.pool.Close() }

// Publish implements Backend, with the file store's rules (Store.Publish).
func (p *Postgres) Publish(ctx context.Context, raw []byte) (*PublishResult, error) {
	f, err := promptfile.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	digest := promptlibrary.DigestOf(raw)
	var res *PublishResult
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// A damaged body is replaced: the digest says what the bytes must be.
		if _, err := tx.Exec(ctx, `INSERT INTO blobs (digest, body) VALUES ($1, $2)
			ON CONFLICT (digest) DO UPDATE SET body = EXCLUDED.body
			WHERE 'sha256:' || encode(sha256(blobs.body), 'hex') <> blobs.digest`, digest, raw); err != nil {
			return fmt.Errorf("prompt store: store the body: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO names (name) VALUES ($1) ON CONFLICT DO NOTHING`, f.Name); err != nil {
			return fmt.Errorf("prompt store: add the name: %w", err)
		}
		// Publishers of one name queue here, in every process; each then
		// reads the versions the ones before it committed.
		if _, err := tx.Exec(ctx, `SELECT name FROM names WHERE name = $1 FOR UPDATE`, f.Name); err != nil {
			return fmt.Errorf("prompt store: lock the name: %w", err)
		}
		existing, err := queryVersions(ctx, tx, f.Name)
		if err != nil {
			return err
		}
		version, seq, stored, err := allocate(f, digest, existing)
		if err != nil {
			return err
		}
		if stored != nil {
			res = &PublishResult{Version: *stored, Existed: true}
			return nil
		}
		v := Version{
			Name: f.Name, Version: version, Seq: seq, Digest: digest, Size: int64(len(raw)),
			PublishedAt:  time.Now().UTC().Truncate(time.Millisecond),
			EnvelopeType: f.EnvelopeType, Description: f.Description, Variables: f.Variables,
		}
		var variables *string
		if len(v.Variables) > 0 {
			s := string(v.Variables)
			variables = &s
		}
		if _, err := tx.Exec(ctx, `INSERT INTO versions
			(name, version, seq, digest, size, published_at, envelope_type, description, variables)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			v.Name, v.Version, v.Seq, v.Digest, v.Size, v.PublishedAt, v.EnvelopeType, v.Description, variables); err != nil {
			return fmt.Errorf("prompt store: record %s@%s: %w", v.Name, v.Version, err)
		}
		res = &PublishResult{Version: v}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// versionColumns are the columns scanVersion reads, in order.
const versionColumns = `name, version, seq, digest, size, published_at, envelope_type, description, variables`

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func scanVersion(row pgx.Row) (Version, error) {
	var v Version
	var variables *string
	if err := row.Scan(&v.Name, &v.Version, &v.Seq, &v.Digest, &v.Size, &v.PublishedAt, &v.EnvelopeType, &v.Description, &variables); err != nil {
		return Version{}, err
	}
	v.PublishedAt = v.PublishedAt.UTC()
	if variables != nil {
		v.Variables = json.RawMessage(*variables)
	}
	return v, nil
}

// queryVersions returns the versions of name in publication order.
func queryVersions(ctx context.Context, q querier, name string) ([]Version, error) {
	rows, err := q.Query(ctx, `SELECT `+versionColumns+` FROM versions WHERE name = $1 ORDER BY seq`, name)
	if err != nil {
		return nil, fmt.Errorf("prompt store: versions of %s: %w", name, err)
	}
	vs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Version, error) { return scanVersion(r) })
	if err != nil {
		return nil, fmt.Errorf("prompt store: versions of %s: %w", name, err)
	}
	return vs, nil
}

// Versions implements Backend.
func (p *Postgres) Versions(ctx context.Context, name string) ([]Version, error) {
	if err := promptlibrary.CheckName(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	vs, err := queryVersions(ctx, p.pool, name)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return vs, nil
}

// Resolve implements Backend, as the file store resolves (Store.Resolve).
func (p *Postgres) Resolve(ctx context.Context, pin promptlibrary.Pin) (*Version, error) {
	if err := promptlibrary.CheckName(pin.Name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var row pgx.Row
	if pin.Version != "" {
		row = p.pool.QueryRow(ctx, `SELECT `+versionColumns+` FROM versions WHERE name = $1 AND version = $2`, pin.Name, pin.Version)
	} else {
		row = p.pool.QueryRow(ctx, `SELECT `+versionColumns+` FROM versions WHERE name = $1 AND digest = $2 ORDER BY seq LIMIT 1`, pin.Name, pin.Digest)
	}
	v, err := scanVersion(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, p.missing(ctx, pin)
	}
	if err != nil {
		return nil, fmt.Errorf("prompt store: resolve %s: %w", pin, err)
	}
	if pin.Version != "" && pin.Digest != "" && v.Digest != pin.Digest {
		return nil, fmt.Errorf("%w: %s@%s is stored with digest %s, the pin says %s", ErrDigestMismatch, pin.Name, pin.Version, v.Digest, pin.Digest)
	}
	return &v, nil
}

// missing says why pin resolved to nothing: no such name, or no such
// version of it.
func (p *Postgres) missing(ctx context.Context, pin promptlibrary.Pin) error {
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM versions WHERE name = $1)`, pin.Name).Scan(&exists); err != nil {
		return fmt.Errorf("prompt store: resolve %s: %w", pin, err)
	}
	if !exists {
		return fmt.Errorf("%w: %s", ErrNotFound, pin.Name)
	}
	if pin.Version != "" {
		return fmt.Errorf("%w: %s@%s", ErrVersionNotFound, pin.Name, pin.Version)
	}
	return fmt.Errorf("%w: no version of %s has digest %s", ErrVersionNotFound, pin.Name, pin.Digest)
}

// Get implements Backend.
func (p *Postgres) Get(ctx context.Context, pin promptlibrary.Pin) (*Version, []byte, error) {
	v, err := p.Resolve(ctx, pin)
	if err != nil {
		return nil, nil, err
	}
	var raw []byte
	err = p.pool.QueryRow(ctx, `SELECT body FROM blobs WHERE digest = $1`, v.Digest).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("%s@%s: %w: body %s is missing", v.Name, v.Version, ErrCorrupt, v.Digest)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("prompt store: read %s@%s: %w", v.Name, v.Version, err)
	}
	if got := promptlibrary.DigestOf(raw); got != v.Digest {
		return nil, nil, fmt.Errorf("%s@%s: %w: body %s now hashes to %s", v.Name, v.Version, ErrCorrupt, v.Digest, got)
	}
	return v, raw, nil
}

// List implements Backend.
func (p *Postgres) List(ctx context.Context) ([]IndexedName, error) {
	rows, err := p.pool.Query(ctx, `SELECT v.name, c.n, v.version, v.digest
		FROM versions v JOIN (SELECT name, count(*) AS n, max(seq) AS last FROM versions GROUP BY name) c
		ON c.name = v.name AND c.last = v.seq
		ORDER BY v.name`)
	if err != nil {
		return nil, fmt.Errorf("prompt store: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IndexedName, error) {
		var n IndexedName
		err := r.Scan(&n.Name, &n.Versions, &n.Last, &n.Digest)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("prompt store: list: %w", err)
	}
	return out, nil
}

// Reindex implements Backend: the database's own indexes are always
// current.
func (p *Postgres) Reindex(context.Context) (string, int, error) {
	return "", 0, ErrNoIndex
}

// Verify implements Backend: every version's body must exist, hash to
// its digest and have its size; a body no version names is an orphan.
func (p *Postgres) Verify(ctx context.Context) (*Report, error) {
	rep := &Report{Problems: []Problem{}}
	rows, err := p.pool.Query(ctx, `SELECT v.name, v.version, v.digest, v.size, b.body
		FROM versions v LEFT JOIN blobs b ON b.digest = v.digest ORDER BY v.name, v.seq`)
	if err != nil {
		return nil, fmt.Errorf("prompt store: verify: %w", err)
	}
	names := map[string]bool{}
	var (
		name, version, digest string
		size                  int64
		body                  []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &version, &digest, &size, &body}, func() error {
		rep.Versions++
		names[name] = true
		ref := name + "@" + version
		where := fmt.Sprintf("%s.versions (%s)", p.schema, ref)
		switch got := promptlibrary.DigestOf(body); {
		case body == nil:
			rep.Problems = append(rep.Problems, Problem{Kind: ProblemCorrupt, Ref: ref, Path: where,
				Message: "its body " + digest + " is missing; publish the file again to restore it"})
		case got != digest:
			rep.Problems = append(rep.Problems, Problem{Kind: ProblemCorrupt, Ref: ref, Path: fmt.Sprintf("%s.blobs (%s)", p.schema, digest),
				Message: "the stored body hashes to " + got + ", not its digest; publish the file again to restore it"})
		case int64(len(body)) != size:
			rep.Problems = append(rep.Problems, Problem{Kind: ProblemCorrupt, Ref: ref, Path: where,
				Message: fmt.Sprintf("the record says %d bytes, the body has %d", size, len(body))})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prompt store: verify: %w", err)
	}
	rep.Names = len(names)
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM blobs`).Scan(&rep.Blobs); err != nil {
		return nil, fmt.Errorf("prompt store: verify: %w", err)
	}
	orphans, err := p.pool.Query(ctx, `SELECT digest FROM blobs b
		WHERE NOT EXISTS (SELECT 1 FROM versions v WHERE v.digest = b.digest) ORDER BY digest`)
	if err != nil {
		return nil, fmt.Errorf("prompt store: verify: %w", err)
	}
	_, err = pgx.ForEachRow(orphans, []any{&digest}, func() error {
		rep.Problems = append(rep.Problems, Problem{Kind: ProblemOrphan, Ref: digest, Path: fmt.Sprintf("%s.blobs (%s)", p.schema, digest),
			Message: "no version names this body; publish its bytes again to restore the version, or delete the row"})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prompt store: verify: %w", err)
	}
	return rep, nil
}
