package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/zclconf/go-cty/cty"
)

// Storage backends.
const (
	// BackendEmbedded keeps state in files and SQLite under state_dir.
	BackendEmbedded = "embedded"
	// BackendPostgres keeps state in a PostgreSQL database that several
	// hosts may share.
	BackendPostgres = "postgres"
)

// Defaults and bounds of the storage block.
const (
	DefaultStorageBackend = BackendEmbedded
	// DefaultStorageMaxConnections is the pool size of each process: the
	// host and every plugin open their own pool.
	DefaultStorageMaxConnections = 8
	// MaxStorageConnections bounds max_connections; PostgreSQL's own
	// max_connections is usually far lower.
	MaxStorageConnections = 1000
	// DefaultStatementTimeout bounds one SQL statement.
	DefaultStatementTimeout = 5 * time.Second
	// MaxSchemaBytes is PostgreSQL's limit on an identifier (NAMEDATALEN-1).
	MaxSchemaBytes = 63
	// DefaultClaimLease is how long an idempotency claim of the postgres
	// backend outlives its host's last renewal.
	DefaultClaimLease = 30 * time.Second
	// MinClaimLease and MaxClaimLease bound claim_lease: the host renews
	// a claim every third of the lease, so a shorter one costs a statement
	// too often, and a longer one keeps a dead host's keys too long.
	MinClaimLease = time.Second
	MaxClaimLease = time.Hour
)

// StorageSchemaPrefix starts the name of every schema the host gives a
// capability.
const StorageSchemaPrefix = "wophost_"

// HostStorageSchema is the schema of the host's own tables (run records,
// idempotency records). It is the prefix without its "_", which no
// capability's schema can be: StorageSchema always starts with the whole
// prefix, whatever the block's name.
const HostStorageSchema = "wophost"

// Storage says where the host and its plugins keep durable state.
type Storage struct {
	// Backend is BackendEmbedded or BackendPostgres.
	Backend string
	// DSN is the PostgreSQL connection string (URL or key=value form) of
	// the postgres backend; "" for embedded. It is a secret: it holds a
	// password, so it is never logged nor put into a diagnostic.
	DSN string
	// MaxConnections is the connection pool size of each process.
	MaxConnections int
	// StatementTimeout bounds each SQL statement on the server.
	StatementTimeout time.Duration
	// ClaimLease is, with the postgres backend, how long a host's
	// idempotency claim stays its own without a renewal: the host renews
	// its claims while their requests run, so a claim outlives its host by
	// at most this long, then another host takes the key over.
	ClaimLease time.Duration

	DefRange hcl.Range
}

// DefaultStorage is the storage of a host block without a storage block.
func DefaultStorage() Storage {
	return Storage{
		Backend:          DefaultStorageBackend,
		MaxConnections:   DefaultStorageMaxConnections,
		StatementTimeout: DefaultStatementTimeout,
		ClaimLease:       DefaultClaimLease,
	}
}

// StorageSchema is the PostgreSQL schema the host gives the capability
// block named name for its own tables: "wophost_" and the name lowercased,
// every byte outside [a-z0-9_] replaced by "_". It depends on the name
// alone, so every host with the same config gives the same schema. A name
// too long for an identifier is cut and ends in a digest of the whole
// name, so two long names still differ.
func StorageSchema(name string) string {
	var b strings.Builder
	b.WriteString(StorageSchemaPrefix)
	for _, c := range []byte(strings.ToLower(name)) {
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) <= MaxSchemaBytes {
		return s
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:])[:12]
	return s[:MaxSchemaBytes-len(suffix)] + suffix
}

// String shows s with the DSN redacted, so that printing a Host or a
// Storage (%v, a log line) never shows the password.
func (s Storage) String() string {
	dsn := ""
	if s.DSN != "" {
		dsn = Redacted
	}
	return fmt.Sprintf("{Backend:%s DSN:%s MaxConnections:%d StatementTimeout:%s}", s.Backend, dsn, s.MaxConnections, s.StatementTimeout)
}

// GoString is String for %#v.
func (s Storage) GoString() string { return "config.Storage" + s.String() }

type rawStorage struct {
	Backend          *hcl.Attribute `hcl:"backend"`
	DSN              *hcl.Attribute `hcl:"dsn"`
	MaxConnections   *hcl.Attribute `hcl:"max_connections"`
	StatementTimeout *hcl.Attribute `hcl:"statement_timeout"`
	ClaimLease       *hcl.Attribute `hcl:"claim_lease"`
	DefRange         hcl.Range      `hcl:",def_range"`
}

const storageBackendList = "embedded, postgres"

func isStorageBackend(s string) bool { return s == BackendEmbedded || s == BackendPostgres }

// storage validates the host block's storage block, if any. The dsn is a
// secret: no diagnostic holds its value, and its literal text is masked
// in the source that diagnostics quote (see secretRanges).
func (d *decoder) storage(blocks []*rawStorage) Storage {
	s := DefaultStorage()
	if len(blocks) == 0 {
		return s
	}
	for _, dup := range blocks[1:] {
		d.errorf(dup.DefRange, "Duplicate storage block",
			"A storage block is declared at %s and again at %s; only one is allowed.",
			posString(blocks[0].DefRange), posString(dup.DefRange))
	}
	raw := blocks[0]
	s.DefRange = raw.DefRange
	if raw.DSN != nil {
		d.maskSecret(raw.DSN.Expr)
	}
	backendOK := raw.Backend == nil
	if b, ok := d.oneOfAttr(raw.Backend, isStorageBackend, storageBackendList); ok {
		s.Backend, backendOK = b, true
	}
	if n, ok := d.intAttr(raw.MaxConnections, 1, MaxStorageConnections); ok {
		s.MaxConnections = n
	}
	if dur, ok := d.durationAttr(raw.StatementTimeout); ok {
		s.StatementTimeout = dur
	}
	if dur, ok := d.durationAttr(raw.ClaimLease); ok {
		if dur < MinClaimLease || dur > MaxClaimLease {
			d.errorf(raw.ClaimLease.Expr.Range(), "Invalid claim_lease",
				"claim_lease must be between %s and %s; got %s.", MinClaimLease, MaxClaimLease, dur)
		} else {
			s.ClaimLease = dur
		}
	}

	if backendOK && s.Backend == BackendEmbedded && raw.ClaimLease != nil {
		d.errorf(raw.ClaimLease.Expr.Range(), "Unexpected claim_lease",
			`claim_lease is only used by backend = "postgres", whose hosts renew their idempotency claims; the embedded backend holds a claim until the run's deadline plus a minute. Remove claim_lease or set backend = "postgres".`)
	}

	var dsn string
	dsnGiven := d.secretAttr(raw.DSN, &dsn)
	switch {
	case !backendOK:
		// Whether a dsn belongs here depends on the backend just refused.
	case s.Backend == BackendPostgres && raw.DSN == nil:
		d.errorf(raw.DefRange, "Missing dsn",
			`The postgres backend needs dsn, the database's connection string, such as dsn = env("WOPHOST_DATABASE_URL").`)
	case s.Backend == BackendEmbedded && raw.DSN != nil:
		d.errorf(raw.DSN.Expr.Range(), "Unexpected dsn",
			`dsn is only used by backend = "postgres"; the embedded backend keeps its state under state_dir. Remove dsn or set backend = "postgres".`)
	case dsnGiven:
		if dsn == "" {
			d.errorf(raw.DSN.Expr.Range(), "Empty value", "dsn must not be empty.")
		} else if _, err := pgconn.ParseConfig(dsn); err != nil {
			// pgconn's error quotes the connection string: only the
			// attribute is named here.
			d.errorf(raw.DSN.Expr.Range(), "Invalid dsn",
				"dsn is not a PostgreSQL connection string that can be parsed: use a URL such as postgres://user@host:5432/db?sslmode=verify-full or key=value pairs. The value is not shown: it is a secret.")
		} else {
			s.DSN = dsn
		}
	}
	return s
}

// secretAttr is attr for a string that is a secret: a value of the wrong
// type is reported without the value, which gohcl would quote.
func (d *decoder) secretAttr(a *hcl.Attribute, target *string) bool {
	v, ok := d.value(a)
	if !ok {
		return false
	}
	if !v.IsKnown() || !v.Type().Equals(cty.String) {
		d.errorf(a.Expr.Range(), "Unsuitable value type", "%s must be a string.", a.Name)
		return false
	}
	*target = v.AsString()
	return true
}

// maskSecret records the source range of a secret's literal text, to be
// masked in the file that diagnostics quote. A function call, such as
// env("WOPHOST_DATABASE_URL"), names where the secret is and is kept.
func (d *decoder) maskSecret(expr hcl.Expression) {
	if _, isCall := expr.(*hclsyntax.FunctionCallExpr); isCall {
		return
	}
	d.secrets = append(d.secrets, expr.Range())
}

// maskRanges returns a copy of src with the bytes of each range replaced
// by '*', quotes kept, so that line and column numbers stay the same.
func maskRanges(src []byte, ranges []hcl.Range) []byte {
	out := append([]byte(nil), src...)
	for _, r := range ranges {
		from, to := r.Start.Byte, r.End.Byte
		if from < 0 || to > len(out) || from >= to {
			continue
		}
		for i := from; i < to; i++ {
			switch out[i] {
			case '"', '\n', '\r':
			default:
				out[i] = '*'
			}
		}
	}
	return out
}

// checkStorageSchemas refuses two capability blocks whose names map to one
// schema ("acme-kv" and "acme_kv", say): they would share tables.
func (d *decoder) checkStorageSchemas(caps []*Capability) {
	first := make(map[string]*Capability, len(caps))
	for _, c := range caps {
		if c.Name == "" {
			continue
		}
		schema := StorageSchema(c.Name)
		prev, dup := first[schema]
		if !dup {
			first[schema] = c
			continue
		}
		if prev.Name != c.Name {
			d.errorf(c.DefRange, "Capability names share a storage schema",
				"Capabilities %q (declared at %s) and %q both get the PostgreSQL schema %q; rename one of them.",
				prev.Name, posString(prev.DefRange), c.Name, schema)
		}
	}
}
