package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/pgtest"
)

// Each DSN is a database of its own, gone once its test ends.
func TestDSN(t *testing.T) {
	var name string
	t.Run("create", func(t *testing.T) {
		conn, err := pgx.Connect(t.Context(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), "CREATE TABLE t (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	if t.Skipped() || name == "" {
		return
	}
	conn, err := pgx.Connect(t.Context(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Fatalf("database %s is still there after its test", name)
	}
}

// A private server can be stopped, which pgstore.Unavailable recognises,
// and started again.
func TestPrivateServer(t *testing.T) {
	srv := pgtest.StartPrivate(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil || !pgstore.Unavailable(err) {
		t.Errorf("a query on a connection to the stopped server: %v, Unavailable = %v", err, pgstore.Unavailable(err))
	}
	_ = conn.Close(ctx)
	if _, err := pgx.Connect(ctx, srv.DSN()); err == nil || !pgstore.Unavailable(err) {
		t.Errorf("connecting to the stopped server: %v, Unavailable = %v", err, pgstore.Unavailable(err))
	}

	srv.Start()
	conn, err = pgx.Connect(ctx, srv.DSN())
	if err != nil {
		t.Fatalf("connect after Start: %v", err)
	}
	defer conn.Close(context.Background())
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
