package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/wophost/wophost/internal/atomicfile"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// IndexFile is the optional SQLite index of a store. It is a cache of the
// version records and nothing else: the files stay the only truth,
// RebuildIndex recreates it from them at any time, and deleting it loses
// nothing. Keep it out of Git.
//
// While the file exists, every publisher adds its version to it under the
// publish lock, and a publisher that fails to update it deletes it. Only a
// publisher killed between making its version visible and indexing it
// leaves the index one version behind; verify reports that, and a rebuild
// repairs it. get never reads the index.
const IndexFile = "index.sqlite"

const indexSchema = `
CREATE TABLE versions (
	name         TEXT NOT NULL,
	version      TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	digest       TEXT NOT NULL,
	size         INTEGER NOT NULL,
	published_at TEXT NOT NULL,
	description  TEXT NOT NULL,
	PRIMARY KEY (name, version)
);
CREATE INDEX versions_digest ON versions (digest);
`

// IndexedName is one row of ListIndex.
type IndexedName = promptlibrary.NameSummary

func (s *Store) indexPath() string { return filepath.Join(s.dir, IndexFile) }

// HasIndex reports whether the store has an index.
func (s *Store) HasIndex() bool {
	_, err := os.Stat(s.indexPath())
	return err == nil
}

// RebuildIndex recreates the index from the version records, under the
// publish lock, and returns the number of versions indexed. The new index
// is built beside the old one and renamed over it.
func (s *Store) RebuildIndex(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lock.Lock(); err != nil {
		return 0, fmt.Errorf("prompt store: lock %s: %w", s.lock.Path(), err)
	}
	defer s.lock.Unlock()
	tmp := s.indexPath() + ".rebuild"
	_ = os.Remove(tmp)
	defer os.Remove(tmp)
	db, err := sql.Open("sqlite", tmp)
	if err != nil {
		return 0, fmt.Errorf("prompt index: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, indexSchema); err != nil {
		return 0, fmt.Errorf("prompt index: %w", err)
	}
	names, err := s.Names()
	if err != nil {
		return 0, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("prompt index: %w", err)
	}
	defer tx.Rollback()
	n := 0
	for _, name := range names {
		vs, err := s.Versions(name)
		if err != nil {
			return 0, err
		}
		for i := range vs {
			if err := insertVersion(ctx, tx, &vs[i]); err != nil {
				return 0, err
			}
			n++
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("prompt index: %w", err)
	}
	if err := db.Close(); err != nil {
		return 0, fmt.Errorf("prompt index: %w", err)
	}
	if err := os.Rename(tmp, s.indexPath()); err != nil {
		return 0, fmt.Errorf("prompt index: %w", err)
	}
	return n, atomicfile.SyncDir(s.dir)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertVersion(ctx context.Context, db execer, v *Version) error {
	_, err := db.ExecContext(ctx, `INSERT INTO versions (name, version, seq, digest, size, published_at, description)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, v.Name, v.Version, v.Seq, v.Digest, v.Size, v.PublishedAt.UTC().Format("2006-01-02T15:04:05.000Z"), v.Description)
	if err != nil {
		return fmt.Errorf("prompt index: add %s@%s: %w", v.Name, v.Version, err)
	}
	return nil
}

// indexPublished adds v to the index if there is one. Publish calls it
// under the lock, after the version is durable; on failure the index is
// deleted, since it would no longer be complete.
func (s *Store) indexPublished(v *Version) error {
	if !s.HasIndex() {
		return nil
	}
	err := func() error {
		db, err := sql.Open("sqlite", s.indexPath())
		if err != nil {
			return err
		}
		defer db.Close()
		return insertVersion(context.Background(), db, v)
	}()
	if err == nil {
		return nil
	}
	if rerr := os.Remove(s.indexPath()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("%w; and removing the stale index failed: %w", err, rerr)
	}
	return nil
}

// ListIndex lists every name with its version count and the version
// published last, from the index. It fails when there is no index.
func (s *Store) ListIndex(ctx context.Context) ([]IndexedName, error) {
	if !s.HasIndex() {
		return nil, fmt.Errorf("prompt store %s has no index", s.dir)
	}
	db, err := sql.Open("sqlite", "file:"+s.indexPath()+"?mode=ro")
	if err != nil {
		return nil, fmt.Errorf("prompt index: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `
		SELECT v.name, c.n, v.version, v.digest
		FROM versions v
		JOIN (SELECT name, COUNT(*) AS n, MAX(seq) AS last FROM versions GROUP BY name) c
		  ON c.name = v.name AND c.last = v.seq
		ORDER BY v.name`)
	if err != nil {
		return nil, fmt.Errorf("prompt index: %w", err)
	}
	defer rows.Close()
	out := []IndexedName{}
	for rows.Next() {
		var e IndexedName
		if err := rows.Scan(&e.Name, &e.Versions, &e.Last, &e.Digest); err != nil {
			return nil, fmt.Errorf("prompt index: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
