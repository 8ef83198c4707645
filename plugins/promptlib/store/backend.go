package store

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// ErrNoIndex: the store keeps no separate index to rebuild.
var ErrNoIndex = errors.New("this prompt store keeps no separate index")

// Backend is a prompt store as the plugin uses it: the file store
// (Files) or the PostgreSQL store (Postgres). Every implementation keeps
// versions immutable and bytes exact, checks the bytes against their
// digest on every read, and lets only one version of a name@version
// exist however many publishers race, in one process or several. Failures
// wrap the Err values of this package.
type Backend interface {
	// Publish stores raw as a new version (see Store.Publish).
	Publish(ctx context.Context, raw []byte) (*PublishResult, error)
	// Resolve returns the record a pin names, without the bytes.
	Resolve(ctx context.Context, pin promptlibrary.Pin) (*Version, error)
	// Get resolves pin and returns its record and its verified bytes.
	Get(ctx context.Context, pin promptlibrary.Pin) (*Version, []byte, error)
	// Versions lists the versions of name in publication order;
	// ErrNotFound when there is none.
	Versions(ctx context.Context, name string) ([]Version, error)
	// List returns every name, sorted, with its version count and the
	// version published last.
	List(ctx context.Context) ([]IndexedName, error)
	// Verify checks every stored version against its digest. It only
	// reads.
	Verify(ctx context.Context) (*Report, error)
	// Reindex rebuilds the store's index, returning the index's name and
	// the versions in it; ErrNoIndex when the store has none.
	Reindex(ctx context.Context) (string, int, error)
	// Where names the store in messages: a directory, or a schema.
	Where() string
	// Close releases what the store holds open.
	Close()
}

// Files returns s as a Backend.
func Files(s *Store) Backend { return files{s} }

// files adapts the file store, whose reads need no context, to Backend.
type files struct{ s *Store }

func (f files) Publish(ctx context.Context, raw []byte) (*PublishResult, error) {
	return f.s.Publish(ctx, raw)
}

func (f files) Resolve(_ context.Context, pin promptlibrary.Pin) (*Version, error) {
	return f.s.Resolve(pin)
}

func (f files) Get(_ context.Context, pin promptlibrary.Pin) (*Version, []byte, error) {
	return f.s.Get(pin)
}

func (f files) Versions(_ context.Context, name string) ([]Version, error) {
	return f.s.Versions(name)
}

// List reads the index when the store has one, else every record.
func (f files) List(ctx context.Context) ([]IndexedName, error) {
	if f.s.HasIndex() {
		return f.s.ListIndex(ctx)
	}
	names, err := f.s.Names()
	if err != nil {
		return nil, err
	}
	out := []IndexedName{}
	for _, n := range names {
		vs, err := f.s.Versions(n)
		if err != nil {
			return nil, err
		}
		last := vs[len(vs)-1]
		out = append(out, IndexedName{Name: n, Versions: len(vs), Last: last.Version, Digest: last.Digest})
	}
	return out, nil
}

func (f files) Verify(context.Context) (*Report, error) { return f.s.Verify() }

func (f files) Reindex(ctx context.Context) (string, int, error) {
	n, err := f.s.RebuildIndex(ctx)
	return filepath.Join(f.s.Dir(), IndexFile), n, err
}

func (f files) Where() string { return f.s.Dir() }

func (f files) Close() {}
