package store

import (
	"context"
	"time"
)

// Backend is what the plugin needs of a store: the embedded one (Store)
// or the PostgreSQL one (Postgres).
type Backend interface {
	// Claim records a new pending envelope under e.Key, or returns the row
	// already there (claimed == false). A failed row with the same digest
	// is replaced.
	Claim(ctx context.Context, e *Envelope) (existing *Envelope, claimed bool, err error)
	// Complete records the result of a pending envelope.
	Complete(ctx context.Context, id string, result []byte, at time.Time) error
	// Fail records the error of a pending envelope.
	Fail(ctx context.Context, id string, errJSON []byte, at time.Time) error
	// Release deletes a pending envelope, leaving its key free.
	Release(ctx context.Context, id string) error
	// Get returns the envelope with the id.
	Get(ctx context.Context, id string) (*Envelope, error)
	// Pending lists every pending envelope, oldest first.
	Pending(ctx context.Context) ([]*Envelope, error)
	// Prune deletes finished envelopes that finished before cutoff, at
	// most batch rows per statement, and returns how many it deleted.
	Prune(ctx context.Context, cutoff time.Time, batch int) (int, error)
	// Close releases the store.
	Close() error
}

// Compactor is implemented by a store kept in a file, whose size the
// plugin manages after a prune: the embedded store. A PostgreSQL store
// leaves space to the database's own vacuum.
type Compactor interface {
	// Incremental reports whether the store can shrink with Reclaim.
	Incremental(ctx context.Context) (bool, error)
	// Reclaim gives the space that deletions freed back.
	Reclaim(ctx context.Context) error
	// Vacuum rewrites the whole store.
	Vacuum(ctx context.Context) error
	// Size returns the bytes the store takes on disk.
	Size() (int64, error)
}

// Shared is implemented by a store several processes use at once: the
// PostgreSQL store. Its pending rows are leased to the process running
// them; each process renews its leases, sweeps the rows whose lease
// passed, and listens for rows finished by the others.
type Shared interface {
	// Renew extends the lease of every pending row this process owns.
	Renew(ctx context.Context) error
	// Sweep releases the synchronous pending rows whose lease passed and
	// takes over at most limit async ones, returning those.
	Sweep(ctx context.Context, limit int) ([]*Envelope, error)
	// Listen calls changed whenever a row finishes or is released, in
	// any process, until ctx ends or the connection fails.
	Listen(ctx context.Context, changed func()) error
	// Handback gives up this process's leases on async rows, so that
	// another process takes them over at once.
	Handback(ctx context.Context) error
}

var (
	_ Backend   = (*Store)(nil)
	_ Compactor = (*Store)(nil)
	_ Backend   = (*Postgres)(nil)
	_ Shared    = (*Postgres)(nil)
)
