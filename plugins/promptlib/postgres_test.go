package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/plugins/promptlib/store"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// With the postgres storage backend the plugin keeps its prompts in its
// schema of the shared database: what one host's plugin publishes,
// another's serves, byte for byte.
func TestPostgresBackend(t *testing.T) {
	ctx := context.Background()
	storage := plugin.Storage{Backend: plugin.StoragePostgres, DSN: pgtest.DSN(t), MaxConnections: 4, Schema: "wophost_prompts"}
	hosts := []*library{newLibrary(), newLibrary()}
	for _, l := range hosts {
		req := &plugin.ConfigureRequest{Config: json.RawMessage(`{}`), StateDir: t.TempDir(), Storage: storage}
		if err := l.configure(ctx, req); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.current().Close() })
		if _, ok := l.current().(*store.Postgres); !ok {
			t.Fatalf("backend %T, want *store.Postgres", l.current())
		}
	}
	raw := "---\r\nname: shared/sys\r\n---\r\nBe exact.  \r\n"
	res, err := hosts[0].Publish(ctx, nil, &promptlibrary.PublishRequest{Raw: []byte(raw)})
	if err != nil || res.Version.Version != "1" {
		t.Fatalf("publish: %+v %v", res, err)
	}
	got, err := hosts[1].Get(ctx, nil, &promptlibrary.GetRequest{PromptID: "shared/sys@1"})
	if err != nil || got.Raw != raw || got.Digest != res.Digest {
		t.Fatalf("the other host's get: %+v %v", got, err)
	}
	if _, err := hosts[1].Publish(ctx, nil, &promptlibrary.PublishRequest{Raw: []byte("---\nname: shared/sys\nversion: 1\n---\nOther.\n")}); wop.CodeOf(err) != promptlibrary.CodePromptVersionConflict {
		t.Errorf("other bytes under shared/sys@1: %v, want %s", err, promptlibrary.CodePromptVersionConflict)
	}
	ver, err := hosts[1].Verify(ctx, nil, &promptlibrary.VerifyRequest{})
	if err != nil || !ver.Report.OK() || ver.Report.Versions != 1 {
		t.Errorf("verify: %+v %v", ver, err)
	}
	if _, err := hosts[0].Reindex(ctx, nil, &promptlibrary.ReindexRequest{}); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("reindex of the postgres store: %v, want %s", err, wop.CodeValidation)
	}
}

// While the database cannot be reached, every call fails with the
// retryable unavailable, not as a missing or corrupt prompt.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	ctx := context.Background()
	// Nothing listens on port 1; the pool connects only when asked.
	pool, err := pgxpool.New(ctx, "postgres://root@127.0.0.1:1/test?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	l := newLibrary()
	l.store = store.NewPostgres(pool, "wophost_prompts")
	defer l.store.Close()
	check := func(what string, err error) {
		t.Helper()
		we := wop.AsError(err)
		if err == nil || we.Code != wop.CodeUnavailable || !we.Retryable {
			t.Errorf("%s with the database down: %v, want retryable %s", what, err, wop.CodeUnavailable)
		}
	}
	_, err = l.Get(ctx, nil, &promptlibrary.GetRequest{PromptID: "a@1"})
	check("get", err)
	_, err = l.Publish(ctx, nil, &promptlibrary.PublishRequest{Raw: []byte("---\nname: a\n---\nHi.\n")})
	check("publish", err)
	_, err = l.List(ctx, nil, &promptlibrary.ListRequest{})
	check("list", err)
}

// With the database out of reach at Configure the plugin asks to be
// configured again later: the retryable unavailable, not a config error.
func TestConfigureDatabaseDown(t *testing.T) {
	storage := plugin.Storage{Backend: plugin.StoragePostgres, DSN: "postgres://root@127.0.0.1:1/test?connect_timeout=2", MaxConnections: 4, Schema: "wophost_prompts"}
	l := newLibrary()
	err := l.configure(context.Background(), &plugin.ConfigureRequest{Config: json.RawMessage(`{}`), StateDir: t.TempDir(), Storage: storage})
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeUnavailable || !we.Retryable {
		t.Fatalf("configure with the database down: %v, want retryable %s", err, wop.CodeUnavailable)
	}
	if l.current() != nil {
		t.Error("a store is set although none opened")
	}
}

// On PostgreSQL a get of a version already read needs no query, and the
// cache holds the bytes that were verified: a body altered in the
// database afterwards is still served good by the host that cached it,
// refused by a host that reads it now, and reported by verify.
func TestPostgresCache(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	storage := plugin.Storage{Backend: plugin.StoragePostgres, DSN: dsn, MaxConnections: 4, Schema: "wophost_prompts"}
	hosts := []*library{newLibrary(), newLibrary()}
	counts := []*countingStore{}
	for _, l := range hosts {
		req := &plugin.ConfigureRequest{Config: json.RawMessage(`{}`), StateDir: t.TempDir(), Storage: storage}
		if err := l.configure(ctx, req); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.current().Close() })
		cs := &countingStore{Backend: l.store}
		l.store = cs
		counts = append(counts, cs)
	}
	raw := "---\nname: shared/sys\n---\nBe exact.\n"
	res, err := hosts[0].Publish(ctx, nil, &promptlibrary.PublishRequest{Raw: []byte(raw)})
	if err != nil {
		t.Fatal(err)
	}
	pin := res.Version.Pin().String()
	for range 3 {
		get(t, hosts[0], pin, raw)
	}
	if n := counts[0].gets.Load(); n != 1 {
		t.Errorf("three gets read the database %d times, want 1", n)
	}

	conn, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(ctx, `UPDATE wophost_prompts.blobs SET body = $1`, []byte("---\nname: shared/sys\n---\nBe vague.\n")); err != nil {
		t.Fatal(err)
	}
	get(t, hosts[0], pin, raw)
	if _, err := hosts[1].Get(ctx, nil, &promptlibrary.GetRequest{PromptID: pin}); wop.CodeOf(err) != promptlibrary.CodePromptDigestMismatch {
		t.Errorf("the other host's get of the altered body: %v, want %s", err, promptlibrary.CodePromptDigestMismatch)
	}
	if _, err := hosts[1].Get(ctx, nil, &promptlibrary.GetRequest{PromptID: pin}); wop.CodeOf(err) != promptlibrary.CodePromptDigestMismatch {
		t.Errorf("the other host's second get of the altered body: %v, want %s (a refusal is not cached)", err, promptlibrary.CodePromptDigestMismatch)
	}
	ver, err := hosts[0].Verify(ctx, nil, &promptlibrary.VerifyRequest{})
	if err != nil || ver.Report.OK() {
		t.Errorf("verify after the body was altered: %+v %v, want a problem", ver, err)
	}
}
