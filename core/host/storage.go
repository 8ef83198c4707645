package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/sdk/wop"
)

// How often the state directory is looked at. A check is a statfs call,
// cached for storageCheckTTL; a write probe (a small synced file) is
// added after a failed write, at the first check, and every
// storageProbeEvery, so the host syncs at most one extra file per
// storageProbeEvery while the directory is healthy.
const (
	storageCheckTTL   = time.Second
	storageProbeEvery = 30 * time.Second
	// storageProbeBytes is one file-system block: a probe that fits in a
	// block already allocated would prove nothing.
	storageProbeBytes = 4096
	// storageSlackBytes is added to the reserve of one run for the file
	// system's own bookkeeping and the records' envelopes.
	storageSlackBytes = 256 << 10
	// storageMinFreeFiles is the fewest free inodes that still take the
	// few files of one run (run record, idempotency record, temporaries).
	storageMinFreeFiles = 16
)

// StorageError says why the host's state directory, or with the postgres
// backend its database, cannot take writes. Ready returns it, and runs are
// refused with it (as a retryable unavailable error) until writes are
// taken again.
type StorageError struct {
	// Dir is the state directory; "" for the database.
	Dir string
	// Backend is config.BackendPostgres when the database is what cannot
	// take writes; "" (or embedded) for the state directory.
	Backend string
	// Reason says what is wrong, e.g. "12 KiB free, below the 32.3 MiB a
	// run may need". It never holds the dsn.
	Reason string
	// cause is the error behind Reason, for the host's log and for
	// errors.Is and As; clients see Reason only.
	cause error
}

func (e *StorageError) Error() string {
	if e.Backend == config.BackendPostgres {
		return "the database cannot take writes: " + e.Reason
	}
	return "the state directory cannot take writes: " + e.Reason
}

// Unwrap returns the error behind the reason, if any.
func (e *StorageError) Unwrap() error { return e.cause }

// space is what statfs says about a file system.
type space struct {
	// avail is the space an unprivileged writer may still use, in bytes.
	avail uint64
	// freeFiles is the free inodes; filesKnown is false on file systems
	// that do not count inodes (they report a total of zero).
	freeFiles  uint64
	filesKnown bool
}

// errNoStatfs is statSpace's answer on systems without statfs.
var errNoStatfs = errors.New("statfs is not supported on this system")

// storageHealth tells whether the state directory can take writes. It
// combines a cheap statfs against a reserve (the largest run's records),
// the last write that failed, and a write probe, and caches its answer
// for storageCheckTTL so that requests add no disk work.
type storageHealth struct {
	dir     string
	reserve uint64
	logger  hclog.Logger
	// notify, when set, is told of every change between writable (true)
	// and not.
	notify func(writable bool)

	// Seams for tests; statSpace, probeWrite and time.Now otherwise.
	space func(dir string) (space, error)
	probe func(dir string) error
	now   func() time.Time
	// ping, when set, is the whole check (the postgres backend): the
	// database answers. The state directory is then not looked at.
	ping func(ctx context.Context) error

	mu      sync.Mutex
	checked time.Time
	probed  time.Time
	err     error
	// writeErr is the last failed write since the last good probe.
	writeErr error
	failing  bool
}

func newStorageHealth(dir string, reserve uint64, logger hclog.Logger, notify func(bool)) *storageHealth {
	return &storageHealth{
		dir: dir, reserve: reserve, logger: logger, notify: notify,
		space: statSpace, probe: probeWrite, now: time.Now,
	}
}

// check returns nil when the state directory can take writes, and a
// *StorageError otherwise.
func (s *storageHealth) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !s.checked.IsZero() && now.Sub(s.checked) < storageCheckTTL {
		return s.err
	}
	s.checked = now
	s.set(s.measure(now))
	return s.err
}

// failed records a write to store under the state directory that
// failed: runs are refused until a probe shows the directory takes
// writes again.
//
// With the database, only a write that failed because the database is out
// of reach (pgstore.Unavailable) counts: a refused statement was answered,
// and the next ping decides whether runs are accepted again.
func (s *storageHealth) failed(store string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ping != nil {
		if !pgstore.Unavailable(err) {
			return
		}
		s.checked = s.now()
		s.set(&StorageError{Backend: config.BackendPostgres, Reason: fmt.Sprintf("a write of %s failed: the database cannot be reached", store), cause: err})
		return
	}
	s.writeErr = err
	s.checked = s.now()
	s.set(&StorageError{Dir: s.dir, Reason: fmt.Sprintf("a write of %s failed: %v", store, cause(err))})
}

// cause is the system's reason for a failed file operation without the
// path it names: the reason reaches clients and /readyz, the path only
// the host's log.
func cause(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	case errors.As(err, &se):
		return se.Err
	}
	return err
}

func (s *storageHealth) measure(now time.Time) error {
	if s.ping != nil {
		ctx, cancel := context.WithTimeout(context.Background(), databasePingTimeout)
		defer cancel()
		if err := s.ping(ctx); err != nil {
			return &StorageError{Backend: config.BackendPostgres, Reason: "it cannot be reached", cause: err}
		}
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return &StorageError{Dir: s.dir, Reason: "it cannot be created: " + cause(err).Error()}
	}
	if sp, err := s.space(s.dir); err == nil {
		if sp.avail < s.reserve {
			return &StorageError{Dir: s.dir, Reason: fmt.Sprintf("%s free, below the %s one run may need (twice max_message_bytes and %s)",
				formatBytes(sp.avail), formatBytes(s.reserve), formatBytes(storageSlackBytes))}
		}
		if sp.filesKnown && sp.freeFiles < storageMinFreeFiles {
			return &StorageError{Dir: s.dir, Reason: fmt.Sprintf("%d free inodes, below the %d a run may need", sp.freeFiles, storageMinFreeFiles)}
		}
	}
	if s.writeErr != nil || s.probed.IsZero() || now.Sub(s.probed) >= storageProbeEvery {
		if err := s.probe(s.dir); err != nil {
			return &StorageError{Dir: s.dir, Reason: "a test write failed: " + cause(err).Error()}
		}
		s.probed, s.writeErr = now, nil
	}
	return nil
}

// set records the outcome of a check, logging and reporting a change.
func (s *storageHealth) set(err error) {
	s.err = err
	failing := err != nil
	if failing == s.failing {
		return
	}
	s.failing = failing
	se, _ := err.(*StorageError)
	switch {
	case failing && s.ping != nil:
		// pgx's errors name the server and user, never the password.
		s.logger.Error("the database cannot take writes; new runs are refused until it can", "schema", config.HostStorageSchema,
			"reason", se.Reason, "error", se.cause)
	case failing:
		s.logger.Error("the state directory cannot take writes; new runs are refused until it can", "dir", s.dir, "reason", se.Reason)
	case s.ping != nil:
		s.logger.Info("the database takes writes again; runs are accepted", "schema", config.HostStorageSchema)
	default:
		s.logger.Info("the state directory takes writes again; runs are accepted", "dir", s.dir)
	}
	if s.notify != nil {
		s.notify(!failing)
	}
}

// probeWrite writes, syncs and removes one block in dir.
func probeWrite(dir string) (err error) {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil && !errors.Is(cerr, os.ErrClosed) {
			err = cerr
		}
		if rerr := os.Remove(f.Name()); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if _, err := f.Write(make([]byte, storageProbeBytes)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// refusal is the error a run is refused with while the state directory,
// or the database, cannot take writes: unavailable and retryable, before
// any pack code runs, with details.storage "state_dir" or "database".
// The directory's path and the database's errors are left to the host's
// log; the dsn appears nowhere.
func refusal(err error) *wop.Error {
	var se *StorageError
	switch {
	case errors.As(err, &se):
	case pgstore.Unavailable(err):
		se = &StorageError{Backend: config.BackendPostgres, Reason: "it cannot be reached"}
	default:
		se = &StorageError{Reason: err.Error()}
	}
	storage := "state_dir"
	if se.Backend == config.BackendPostgres {
		storage = "database"
	}
	return wop.Errorf(wop.CodeUnavailable, "%s; the run was refused before it started", se.Error()).
		WithRetryable(true).WithDetails(map[string]string{"storage": storage})
}

// formatBytes writes n in the largest binary unit that keeps it at or
// above 1.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
