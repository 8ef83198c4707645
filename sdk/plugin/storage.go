package plugin

import (
	"fmt"
	"time"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// Storage backends, as in Storage.Backend.
const (
	// StorageEmbedded keeps state in files and SQLite under StateDir.
	StorageEmbedded = "embedded"
	// StoragePostgres keeps state in a PostgreSQL database that every
	// host with the same config shares.
	StoragePostgres = "postgres"
)

// Storage is the host's storage block as a plugin uses it: where its
// durable state goes.
type Storage struct {
	// Backend is StorageEmbedded or StoragePostgres. An older host sends
	// nothing: "" then means StorageEmbedded.
	Backend string
	// DSN is the PostgreSQL connection string of the postgres backend,
	// "" for embedded. It is a secret (it holds the password): never log
	// it, nor put it into an error or a diagnostic.
	DSN string
	// MaxConnections is the size of this process's connection pool.
	MaxConnections int
	// StatementTimeout bounds each SQL statement on the server.
	StatementTimeout time.Duration
	// Schema is the PostgreSQL schema the host gives this plugin for its
	// own tables: "wophost_" and the capability block's name lowercased,
	// every character outside [a-z0-9_] replaced by "_", at most 63 bytes.
	// Every host with the same config gives the same schema, so hosts
	// sharing a database share the plugin's tables.
	Schema string
}

// String shows s with the DSN redacted.
func (s Storage) String() string {
	dsn := ""
	if s.DSN != "" {
		dsn = "(sensitive)"
	}
	return fmt.Sprintf("{Backend:%s DSN:%s MaxConnections:%d StatementTimeout:%s Schema:%s}",
		s.Backend, dsn, s.MaxConnections, s.StatementTimeout, s.Schema)
}

// GoString is String for %#v.
func (s Storage) GoString() string { return "plugin.Storage" + s.String() }

// StorageToProto is s as the protocol sends it in ConfigureRequest.
func StorageToProto(s Storage) *wophostv1.StorageSettings {
	return &wophostv1.StorageSettings{
		Backend: s.Backend, Dsn: s.DSN, MaxConnections: int32(min(s.MaxConnections, 1<<31-1)),
		StatementTimeoutMs: s.StatementTimeout.Milliseconds(), Schema: s.Schema,
	}
}

// StorageFromProto is the Storage that ConfigureRequest's settings p
// describe; nil (an older host) is the embedded backend.
func StorageFromProto(p *wophostv1.StorageSettings) Storage {
	s := Storage{
		Backend: p.GetBackend(), DSN: p.GetDsn(), MaxConnections: int(p.GetMaxConnections()),
		StatementTimeout: time.Duration(p.GetStatementTimeoutMs()) * time.Millisecond, Schema: p.GetSchema(),
	}
	if s.Backend == "" {
		s.Backend = StorageEmbedded
	}
	return s
}
