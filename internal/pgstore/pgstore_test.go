package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// migrations count their own runs in applied, so that a migration applied
// twice shows.
var migrations = fstest.MapFS{
	"001_create_items.sql": {Data: []byte(`
CREATE TABLE applied (migration int NOT NULL);
INSERT INTO applied VALUES (1);
CREATE TABLE items (id text PRIMARY KEY);
`)},
	"002_add_note.sql": {Data: []byte(`
INSERT INTO applied VALUES (2);
ALTER TABLE items ADD COLUMN note text NOT NULL DEFAULT '';
`)},
}

func settings(dsn string) pgstore.Settings {
	return pgstore.Settings{Backend: plugin.StoragePostgres, DSN: dsn, MaxConnections: 4, StatementTimeout: 500 * time.Millisecond}
}

// Four hosts opening one schema at once apply each migration once.
func TestOpenConcurrent(t *testing.T) {
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			pool, err := pgstore.Open(t.Context(), settings(dsn), "wophost_items", migrations)
			if err == nil {
				pool.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	pool, err := pgstore.Open(t.Context(), settings(dsn), "wophost_items", migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var runs []int
	rows, _ := pool.Query(t.Context(), "SELECT migration FROM applied ORDER BY migration")
	runs, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0] != 1 || runs[1] != 2 {
		t.Fatalf("migrations applied %v times, want [1 2] (each once)", runs)
	}
	var version int
	if err := pool.QueryRow(t.Context(), "SELECT version FROM "+pgstore.VersionTable).Scan(&version); err != nil || version != 2 {
		t.Fatalf("version %d, %v; want 2", version, err)
	}
}

// Every connection of the pool has the schema as search_path and the
// settings' statement_timeout.
func TestOpenSessionSettings(t *testing.T) {
	dsn := pgtest.DSN(t)
	pool, err := pgstore.Open(t.Context(), settings(dsn), "wophost_items", migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Holding every connection at once makes the check cover all of them.
	conns := make([]interface{ Release() }, 0, 4)
	// Released before the pool closes, which waits for them, even when
	// the test fails.
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range 4 {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var path, timeout string
		if err := c.QueryRow(t.Context(), "SELECT current_setting('search_path'), current_setting('statement_timeout')").Scan(&path, &timeout); err != nil {
			t.Fatal(err)
		}
		if path != "wophost_items" || timeout != "500ms" {
			t.Fatalf("search_path %q, statement_timeout %q; want wophost_items, 500ms", path, timeout)
		}
		// Unqualified names are the schema's.
		if _, err := c.Exec(t.Context(), "INSERT INTO items (id) VALUES ($1)", strconv.Itoa(len(conns))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		c.Release()
	}
	conns = nil

	_, err = pool.Exec(t.Context(), "SELECT pg_sleep(2)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("a statement longer than statement_timeout: %v, want SQLSTATE 57014 (query_canceled)", err)
	}
	if pgstore.Unavailable(err) {
		t.Error("Unavailable is true for a statement timeout: the database answered")
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	s := settings("postgres://app:hunter2-s3cret@127.0.0.1:notaport/x")
	if _, err := pgstore.Open(ctx, s, "wophost_x", migrations); err == nil || strings.Contains(err.Error(), "hunter2-s3cret") {
		t.Errorf("unparsable dsn: %v", err)
	}
	if _, err := pgstore.Open(ctx, settings("postgres://127.0.0.1/x"), `x"; DROP`, migrations); err == nil {
		t.Error("a schema that needs quoting was accepted")
	}
	s = settings("postgres://127.0.0.1/x")
	s.Backend = plugin.StorageEmbedded
	if _, err := pgstore.Open(ctx, s, "wophost_x", migrations); err == nil {
		t.Error("the embedded backend was opened")
	}
}

// Unavailable tells a lost database from one that refused a statement.
func TestUnavailable(t *testing.T) {
	dsn := pgtest.DSN(t)
	pool, err := pgstore.Open(t.Context(), settings(dsn), "wophost_items", migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(t.Context(), "INSERT INTO items (id) VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(t.Context(), "INSERT INTO items (id) VALUES ('a')")
	if err == nil || pgstore.Unavailable(err) {
		t.Errorf("a unique violation: %v, Unavailable = %v", err, pgstore.Unavailable(err))
	}
	if _, err := pool.Exec(t.Context(), "SELEC 1"); err == nil || pgstore.Unavailable(err) {
		t.Errorf("a syntax error: %v", err)
	}
	if pgstore.Unavailable(nil) {
		t.Error("Unavailable(nil)")
	}

	// A backend terminated by the server is a lost connection.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "SELECT pg_terminate_backend(pg_backend_pid())"); err == nil || !pgstore.Unavailable(err) {
		t.Errorf("terminated backend: %v, Unavailable = %v", err, pgstore.Unavailable(err))
	}

	// Nothing listens on a port just freed.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := pgx.Connect(ctx, "postgres://root@127.0.0.1:1/x?sslmode=disable&connect_timeout=5"); err == nil || !pgstore.Unavailable(err) {
		t.Errorf("connection refused: %v, Unavailable = %v", err, pgstore.Unavailable(err))
	}
}

// Opening a store while the database is out of reach is the retryable
// unavailable a Configure returns to be configured again; a refusal is
// returned as it is.
func TestConfigureError(t *testing.T) {
	_, err := pgstore.Open(t.Context(), settings("postgres://root@127.0.0.1:1/x?sslmode=disable&connect_timeout=5"), "wophost_items", migrations)
	if err == nil {
		t.Fatal("Open with nothing listening succeeded")
	}
	we := wop.AsError(pgstore.ConfigureError(err))
	if we.Code != wop.CodeUnavailable || !we.Retryable {
		t.Errorf("ConfigureError(%v) = %+v, want retryable %s", err, we, wop.CodeUnavailable)
	}
	refused := errors.New("pgstore: schema \"X\" is not a lowercase identifier")
	if got := pgstore.ConfigureError(refused); got != refused {
		t.Errorf("ConfigureError(%v) = %v, want it unchanged", refused, got)
	}
	if pgstore.ConfigureError(nil) != nil {
		t.Error("ConfigureError(nil) is not nil")
	}
}
