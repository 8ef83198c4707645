package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// MinRetention is the shortest time a key's outcome may be kept (OpenWOP:
// at least 24 hours).
const MinRetention = 24 * time.Hour

// State is the state of a record.
type State string

// Record states.
const (
	// StatePending is a claim: the key's first request is running.
	StatePending State = "pending"
	// StateDone holds the key's final outcome.
	StateDone State = "done"
)

// Record is what the store keeps for one key: a claim while its request
// runs, then the request's final outcome.
type Record struct {
	// ID is the (scope, key) identity from ID; never the key itself.
	ID    string `json:"id"`
	State State  `json:"state"`
	// Request is the RequestDigest of the request the key was first used
	// with; any other request under the key is a mismatch.
	Request string `json:"request"`
	TypeID  string `json:"typeId"`
	// Owner is a random token of the claim: Complete and Release act only
	// on the claim they made, never on one that replaced it.
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"createdAt"`
	// LeaseUntil ends a pending claim: after it, the host that made the
	// claim is taken to be gone (its run is past its deadline, or, in a
	// Leaser, its host stopped renewing the claim), and the key may be
	// taken over.
	LeaseUntil  time.Time `json:"leaseUntil"`
	CompletedAt time.Time `json:"completedAt,omitzero"`
	// RunID is the run that produced the outcome.
	RunID string `json:"runId,omitempty"`
	// Output is the node's output when it succeeded; Error its error
	// envelope when it failed with an outcome that is kept: a run that
	// failed for good (RunID set) or a refusal Final keeps (no RunID).
	Output json.RawMessage `json:"output,omitempty"`
	Error  *wop.Error      `json:"error,omitempty"`
	// RunRecord is the path of the run's record, when it was written.
	RunRecord string `json:"runRecord,omitempty"`
}

// Live reports whether r still holds its key at now: a pending claim
// until its lease ends, a done record until ttl after completion.
func (r *Record) Live(now time.Time, ttl time.Duration) bool {
	switch r.State {
	case StatePending:
		return now.Before(r.LeaseUntil)
	case StateDone:
		return now.Before(r.CompletedAt.Add(ttl))
	}
	return false
}

// Errors a Store returns that callers branch on.
var (
	// ErrNotFound: no record holds the ID.
	ErrNotFound = errors.New("idempotency record not found")
	// ErrNotOwner: the claim was released or replaced by another owner
	// (its lease ended and another request took the key over).
	ErrNotOwner = errors.New("idempotency claim is no longer held by this owner")
)

// Store keeps idempotency records. Implementations are safe for
// concurrent use, also by several processes sharing the same storage
// (a host and its reloaded successor, `host run` beside `host serve`):
// Claim is an atomic insert-if-absent, and Complete and Release are
// compare-and-swap on the claim's owner.
type Store interface {
	// Get returns the record holding id, live or not, or ErrNotFound.
	Get(ctx context.Context, id string) (*Record, error)
	// Claim inserts claim, a pending record, unless a record live at now
	// (see Record.Live, with ttl) holds its ID; a record that is not live
	// is replaced. It returns nil when the claim was inserted and durable,
	// or the live record that holds the ID.
	Claim(ctx context.Context, claim *Record, now time.Time, ttl time.Duration) (held *Record, err error)
	// Complete replaces the pending claim with done (same ID and Owner,
	// State done), durably; ErrNotOwner when the claim is gone.
	Complete(ctx context.Context, done *Record) error
	// Release removes the pending claim with id and owner, so that the
	// key's next request runs; ErrNotOwner when it is not held by owner.
	Release(ctx context.Context, id, owner string) error
	// Prune removes every record that is not live at now, oldest first,
	// and returns how many it removed and how many remain.
	Prune(ctx context.Context, now time.Time, ttl time.Duration) (removed, remaining int, err error)
}

// Held names one claim: its record's ID and its Owner.
type Held struct {
	ID, Owner string
}

// Leaser is a Store whose claims are held under a short lease that the
// claiming host renews while the request runs, so that a claim outlives
// a host that died by at most one lease: the postgres backend, shared by
// several hosts. A store that is not a Leaser holds a claim until the
// lease it was made with ends.
type Leaser interface {
	Store
	// Renew moves the lease of each of claims still pending under its
	// owner to until (never earlier) and returns the owners it renewed;
	// a claim left out was completed, released, pruned or taken over.
	Renew(ctx context.Context, claims []Held, until time.Time) (renewed map[string]bool, err error)
}

// Final reports whether a refusal is kept and answered again to a
// repeated request (OpenWOP's Layer 1, written in terms of the HTTP
// answer): a refusal the caller cannot fix by retrying is kept: a 4xx
// status, not retryable, and none of 429, a request the host could not
// read (validation_error, idempotency_key_invalid), an authentication or
// permission refusal (401, 403), or the key's own mismatch and in-flight
// answers. 5xx and retryable refusals are not kept: their repeat is tried
// again. status and code are the HTTP answer's; which outcomes of a node
// that ran are kept is decided by the caller (see httpstatus.Kept).
func Final(status int, code string, retryable bool) bool {
	if retryable || status < 400 || status >= 500 {
		return false
	}
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return false
	}
	switch code {
	case wop.CodeValidation, CodeKeyInvalid, CodeKeyMismatch, CodeInFlight:
		return false
	}
	return true
}
