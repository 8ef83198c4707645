package api

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/sdk/wop"
)

// replaySuffix ends the path of a replay: POST /v1/runs/{runId}:replay.
const replaySuffix = ":replay"

// replayRequest is the body of POST /v1/runs/{runId}:replay; an empty
// body replays with every call that has effects answered from the log.
type replayRequest struct {
	// Live names calls to run for real (FAMILY or FAMILY.METHOD): the
	// replay becomes a branch.
	Live      []string `json:"live,omitempty"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
	// IdempotencyKey is the body's spelling of the Idempotency-Key
	// header, as on an execute.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// replayOutcome is the answer of a replay: the run's outcome, as an
// execute answers it, and what the replay did with each call.
type replayOutcome struct {
	httpstatus.Outcome
	Replay *dispatch.ReplaySummary `json:"replay,omitempty"`
}

// replay runs the node of a recorded run again from its run record
// (docs/replay.md).
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	runID, ok := strings.CutSuffix(r.PathValue("run"), replaySuffix)
	if !ok {
		// A run's own path is read, not posted to; runs replay at
		// POST /v1/runs/{runId}:replay.
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	if !host.IsRunID(runID) {
		writeError(w, errNotARunID())
		return
	}
	var req replayRequest
	if r.ContentLength != 0 {
		if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	if req.TimeoutMs < 0 {
		writeError(w, wop.Errorf(wop.CodeValidation, `field "timeoutMs": must not be negative`))
		return
	}
	key, err := idempotencyKey(r, req.IdempotencyKey)
	if err != nil {
		writeError(w, err)
		return
	}
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, errNoHost())
		return
	}
	rec, err := s.visibleRecord(r, b, runID)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	if key != "" {
		// As for an execute: a keyed replay goes on to its outcome when
		// the client goes away, so that the retry gets that outcome.
		ctx = context.WithoutCancel(ctx)
	}
	res, err := b.Run(ctx, rec.TypeID, rec.Input, host.RunOptions{
		Timeout:          msTimeout(req.TimeoutMs),
		IdempotencyKey:   key,
		IdempotencyScope: idempotency.Scope(s.credential(r)),
		Traceparent:      r.Header.Get("traceparent"),
		Record:           true,
		Replay:           rec,
		Live:             req.Live,
	})
	if res != nil && res.Replayed {
		w.Header()[HeaderIdempotentReplay] = []string{"true"}
	}
	if res == nil || res.RunID == "" {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, replayOutcome{Outcome: httpstatus.NewOutcome(res.RunID, res.Output, err), Replay: res.Replay})
}

// msTimeout is a request's timeoutMs as a duration. One too large for a
// duration (past 2^63-1 ns, about 292 years) is the largest, never a
// wrapped-around one: the host then holds it to run_timeout.
func msTimeout(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// errNotARunID refuses an id outside the run id grammar before any record
// is looked up, without quoting it: the id is the caller's and may be any
// length.
func errNotARunID() error {
	return wop.Errorf(wop.CodeNotFound, "no run has this id: a run id is run_ and 1 to %d lowercase hex digits", host.MaxRunIDHexDigits)
}

// errNoRecord is the answer for a run without a record, and for the run
// of another token: the same, so that a token learns nothing of the runs
// of others.
func errNoRecord(runID string) error {
	return wop.Errorf(wop.CodeNotFound, "no run record %s", runID)
}

// visibleRecord returns the record of runID when the request's credential
// may see it (maySee), and otherwise the error to answer: not_found for a
// run never recorded or another token's, run_expired for one retention
// pruned, replay_source_missing for a record that cannot be trusted, and
// internal for a storage failure, whose text is left to the log.
func (s *Server) visibleRecord(r *http.Request, b Backend, runID string) (*host.RunRecord, error) {
	rec, err := b.RunRecord(r.Context(), runID)
	if err != nil {
		var we *wop.Error
		switch {
		case wop.CodeOf(err) != host.CodeRunExpired && errors.Is(err, fs.ErrNotExist):
			err = errNoRecord(runID)
		case !errors.As(err, &we):
			// A storage failure: its text names files or the database,
			// which are the operator's to read in the log, not the
			// caller's.
			s.opts.Logger.Error("run record unreadable", "run_id", runID, "error", err)
			err = wop.Errorf(wop.CodeInternal, "the record of run %s cannot be read; the host's log says why", runID)
		}
		return nil, err
	}
	if !s.maySee(r, rec.Owner) {
		return nil, errNoRecord(runID)
	}
	return rec, nil
}
