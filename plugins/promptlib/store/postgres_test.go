package store

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// openPostgres returns n stores, each with its own pool, on one fresh
// schema.
func openPostgres(t *testing.T, n int) []Backend {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://root@127.0.0.1:5432/test")
	if err != nil {
		t.Skip("no PostgreSQL server:", err)
	}
	defer admin.Close(ctx)
	db := fmt.Sprintf("prompts_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	dsn := "postgres://root@127.0.0.1:5432/" + db + "?search_path=prompts"
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	mig, _ := fs.ReadFile(Migrations(), "001_create_prompts.sql")
	if _, err := c.Exec(ctx, "CREATE SCHEMA prompts; "+string(mig)); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	var out []Backend
	for range n {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		b := NewPostgres(pool, "prompts")
		t.Cleanup(b.Close)
		out = append(out, b)
	}
	_ = strings.TrimSpace
	return out
}
