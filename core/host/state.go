package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/idempotency"
)

// IdempotencyDir is the directory under the host's state_dir that holds
// the outcomes of idempotency keys.
const IdempotencyDir = "idempotency"

// Names of the stores under state_dir, as metrics and logs name them.
const (
	StoreRunRecords      = "run_records"
	StoreIdempotencyKeys = "idempotency_keys"
)

// StateObserver is told what happens to the host's state directory. The
// observer given to ObserveCalls is told too when it implements it, so
// that one metrics object serves calls and state alike.
type StateObserver interface {
	// StateWritable reports a change between a state directory that
	// takes writes (true) and one that does not.
	StateWritable(writable bool)
	// StateWriteFailed counts a write to store that failed.
	StateWriteFailed(store string)
	// IdempotentReplay counts a request answered with the recorded
	// outcome of its idempotency key.
	IdempotentReplay(typeID string)
	// Pruned counts records of store removed by retention.
	Pruned(store string, n int)
}

// state is what a host keeps under its state_dir besides the plugins'
// own directories: the health of the directory, the idempotency store,
// and the retention that bounds both. The files belong to the directory,
// not to one host: a reloaded host and `host run` beside `host serve`
// share them, which the stores allow.
type state struct {
	dir string
	// storage is the host's storage block: with the postgres backend the
	// run records and idempotency records are kept in the database, in
	// the schema config.HostStorageSchema (database.go), and the health
	// check reports the database rather than the directory.
	storage   config.Storage
	retention config.Retention
	// maxRecordBytes bounds an idempotency record read back: an output of
	// max_message_bytes and its envelope.
	maxRecordBytes int64
	logger         hclog.Logger
	observer       func() StateObserver
	inFlight       func(runID string) bool
	health         *storageHealth
	// synced, when not nil, is told of each sync a run record's write
	// made; set only by this package's tests.
	synced func(path string)
	// now is the clock of idempotency outcomes and their expiry:
	// time.Now, or a test's clock.
	now func() time.Time
	// summaries caches the summaries of the run record files that
	// listings read (embedded backend only).
	summaries *summaryCache

	mu    sync.Mutex
	store idempotency.Store
	// unsaved holds final outcomes a run produced whose record could not
	// be written (a full disk): they are answered from here and written
	// as soon as the directory takes writes again.
	unsaved map[string]*idempotency.Record
	// keys is how many idempotency records exist, as of the last pruning
	// plus the claims made since; keysKnown is false before the first
	// pruning has counted them.
	keys      int
	keysKnown bool

	// claims are the claims in flight in a leased store, renewed while
	// their runs go on.
	claims *claimLeases

	cancel context.CancelFunc
	done   sync.WaitGroup

	// dbMu guards the pool of the postgres backend, opened at start (or
	// at the first use after a failed opening) and closed at close.
	dbMu     sync.Mutex
	pool     *pgxpool.Pool
	dbClosed bool
}

func newState(h *Host) *state {
	return newStateFor(h.cfg.Host, h.logger.Named("state"),
		func(id string) bool { _, ok := h.runs.Get(id); return ok },
		func() StateObserver {
			o, _ := h.router.Observer().(StateObserver)
			return o
		})
}

// newStateFor returns the state of a host with settings cfg. inFlight
// reports whether a run is in flight; observer returns the observer to
// tell, or nil.
func newStateFor(cfg config.Host, logger hclog.Logger, inFlight func(runID string) bool, observer func() StateObserver) *state {
	s := &state{
		dir:            cfg.StateDir,
		storage:        cfg.Storage,
		retention:      cfg.Retention,
		maxRecordBytes: int64(cfg.MaxMessageBytes) + 1<<20,
		logger:         logger,
		observer:       observer,
		inFlight:       inFlight,
		unsaved:        map[string]*idempotency.Record{},
		now:            time.Now,
		claims:         newClaimLeases(cfg.Storage.ClaimLease),
		summaries:      newSummaryCache(),
	}
	// One run may write an input and an output of max_message_bytes each.
	reserve := 2*uint64(cfg.MaxMessageBytes) + storageSlackBytes
	s.health = newStorageHealth(cfg.StateDir, reserve, logger, func(ok bool) {
		if o := s.observer(); o != nil {
			o.StateWritable(ok)
		}
	})
	if s.postgres() {
		s.health.ping = s.ping
	}
	return s
}

// writable returns nil when the state directory can take the writes of
// a run, and the retryable refusal otherwise.
func (s *state) writable() error {
	if err := s.health.check(); err != nil {
		return refusal(err)
	}
	return nil
}

// writeFailed records a failed write to store: it is logged, counted,
// and refuses runs until the directory takes writes again.
func (s *state) writeFailed(store string, err error) {
	s.health.failed(store, err)
	if o := s.observer(); o != nil {
		o.StateWriteFailed(store)
	}
}

// idempotencyStore opens the store on first use; a failure is retried
// at the next use.
func (s *state) idempotencyStore() (idempotency.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store != nil {
		return s.store, nil
	}
	st, err := s.openIdempotencyStore()
	if err != nil {
		return nil, err
	}
	s.store = st
	return st, nil
}

// start opens the database of the postgres backend, then begins the
// maintenance of the state: pruning now and every retention interval, and
// writing unsaved outcomes. close ends it. A database that cannot be
// opened now is opened at its next use: until then the health check
// refuses runs.
func (s *state) start() {
	if s.postgres() {
		_, _ = s.database(context.Background())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done.Add(2)
	go func() { defer s.done.Done(); s.maintain(ctx) }()
	go func() { defer s.done.Done(); s.renewClaims(ctx) }()
}

// close stops the maintenance, waits for it, and makes a last attempt to
// write the unsaved outcomes.
func (s *state) close() {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		s.done.Wait()
	}
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if n := s.flush(ctx); n > 0 {
		s.logger.Error("outcomes of idempotency keys could not be written before the host stopped; their keys stay claimed until their leases end",
			"count", n)
	}
	s.closeDatabase()
}

// keep holds an outcome whose record could not be written.
func (s *state) keep(r *idempotency.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsaved[r.ID] = r
}

// unsavedRecord returns the unsaved outcome of id, if any.
func (s *state) unsavedRecord(id string) *idempotency.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsaved[id]
}

// flush writes the unsaved outcomes and returns how many remain unsaved.
func (s *state) flush(ctx context.Context) int {
	s.mu.Lock()
	pending := make([]*idempotency.Record, 0, len(s.unsaved))
	for _, r := range s.unsaved {
		pending = append(pending, r)
	}
	store := s.store
	s.mu.Unlock()
	if len(pending) == 0 || store == nil {
		return len(pending)
	}
	if s.health.check() != nil {
		return len(pending)
	}
	left := 0
	for _, r := range pending {
		err := store.Complete(ctx, r)
		switch {
		case err == nil:
			s.logger.Info("an unsaved idempotency outcome was written", "run_id", r.RunID)
		case errors.Is(err, idempotency.ErrNotOwner):
			s.logger.Error("an unsaved idempotency outcome was dropped: its claim ended and was taken over", "run_id", r.RunID)
		default:
			s.writeFailed(StoreIdempotencyKeys, err)
			left++
			continue
		}
		s.mu.Lock()
		if s.unsaved[r.ID] == r {
			delete(s.unsaved, r.ID)
		}
		s.mu.Unlock()
	}
	return left
}

// claimed counts a new idempotency record; released uncounts one.
func (s *state) claimed()  { s.addKeys(1) }
func (s *state) released() { s.addKeys(-1) }

func (s *state) addKeys(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys += n
}

// keysFull reports whether the store holds max_idempotency_keys keys.
func (s *state) keysFull() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys, s.keysKnown && s.keys >= s.retention.MaxIdempotencyKeys
}

func (s *state) setKeys(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys, s.keysKnown = n, true
}
