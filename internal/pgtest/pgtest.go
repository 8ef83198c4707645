// Package pgtest gives tests a PostgreSQL database: a fresh database on a
// shared server (DSN), or a private server a test may stop and start
// (StartPrivate). Without a server the tests skip, unless the environment
// variable WOPHOST_TEST_POSTGRES is set (as CI sets it): then they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables the helpers read.
const (
	// EnvDSN names the shared server's connection string.
	EnvDSN = "WOPHOST_TEST_POSTGRES_DSN"
	// EnvRequired, when set, makes a missing server fail a test rather
	// than skip it.
	EnvRequired = "WOPHOST_TEST_POSTGRES"
)

// DefaultServerDSN is the shared server used when EnvDSN is not set.
const DefaultServerDSN = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// connectTimeout bounds reaching the server, so that a machine without one
// skips quickly.
const connectTimeout = 5 * time.Second

// DSN creates a database of a random name (wophost_test_<hex>) on the
// shared server, drops it when the test ends, and returns its connection
// string.
func DSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv(EnvDSN)
	if server == "" {
		server = DefaultServerDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		// pgx's error spans lines; the message is one.
		unavailable(t, "no PostgreSQL at %s (%s)", redacted(server), strings.Join(strings.Fields(err.Error()), " "))
	}
	defer conn.Close(context.Background())

	name := "wophost_test_" + randomHex(t)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, server, name) })

	u, err := url.Parse(server)
	if err != nil || u.Scheme == "" {
		t.Fatalf("pgtest: %s must be a postgres:// URL", EnvDSN)
	}
	u.Path = "/" + name
	return u.String()
}

// dropDatabase drops name, closing the connections a test left open.
func dropDatabase(t testing.TB, server, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
	}
}

// unavailable skips t, or fails it when EnvRequired is set, with one line
// saying why and what to set.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + fmt.Sprintf(": set %s, or %s=1 to make this a failure", EnvDSN, EnvRequired)
	if os.Getenv(EnvRequired) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func randomHex(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return hex.EncodeToString(b)
}

// redacted is dsn without its password, for messages.
func redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(an unparsable " + EnvDSN + ")"
	}
	return u.Redacted()
}
