package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/sdk/wop"
)

// runListParams are the query parameters of GET /v1/runs.
func runListParams() []string {
	return []string{"typeId", "status", "errorCode", "idempotencyKey", "since", "until", "limit", "after"}
}

// maxUnknownParams bounds how many unknown parameters a refusal names.
const maxUnknownParams = 5

// errParam is the validation error of query parameter name.
func errParam(name, format string, args ...any) error {
	return wop.Errorf(wop.CodeValidation, "query parameter %q: %s", clip(name, 64), fmt.Sprintf(format, args...)).
		WithDetails(map[string]string{"field": clip(name, 64)})
}

// runFilter reads the filter of GET /v1/runs from the query string: each
// known parameter at most once, none unknown. Limits and the cursor are
// checked by the host (host.RunFilter).
func runFilter(r *http.Request) (host.RunFilter, error) {
	var f host.RunFilter
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return f, wop.Errorf(wop.CodeValidation, "the query string cannot be read: %s", clip(err.Error(), maxEchoBytes))
	}
	known := runListParams()
	var unknown []string
	for name, values := range q {
		if !slices.Contains(known, name) {
			unknown = append(unknown, strconv.Quote(clip(name, 64)))
			continue
		}
		if len(values) > 1 {
			return f, errParam(name, "given %d times; give it once", len(values))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		more := ""
		if len(unknown) > maxUnknownParams {
			more = fmt.Sprintf(" and %d more", len(unknown)-maxUnknownParams)
			unknown = unknown[:maxUnknownParams]
		}
		return f, wop.Errorf(wop.CodeValidation, "unknown query parameters %s%s; the runs are filtered by %s",
			strings.Join(unknown, ", "), more, strings.Join(known, ", ")).
			WithDetails(map[string]string{"field": strings.Trim(unknown[0], `"`)})
	}
	f.TypeID, f.ErrorCode, f.IdempotencyKey, f.After = q.Get("typeId"), q.Get("errorCode"), q.Get("idempotencyKey"), q.Get("after")
	switch status := q.Get("status"); status {
	case "", host.OutcomeSucceeded, host.OutcomeFailed:
		f.Outcome = status
	default:
		return f, errParam("status", "must be %s or %s", host.OutcomeSucceeded, host.OutcomeFailed)
	}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			if *t.to, err = time.Parse(time.RFC3339, v); err != nil {
				return f, errParam(t.name, "not an RFC 3339 time such as 2026-01-02T03:04:05Z")
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case errors.Is(err, strconv.ErrRange), err == nil && n == 0:
			// 0 would be the host's default; asked for, it is out of range.
			return f, errParam("limit", "must be 1 to %d", host.MaxRunListLimit)
		case err != nil:
			return f, errParam("limit", "not a whole number")
		}
		f.Limit = n
	}
	return f, nil
}

// listRuns serves GET /v1/runs: the recorded runs the caller may see
// (visibility), filtered and paged, as {"runs": [...], "next": "..."}.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	f, err := runFilter(r)
	if err != nil {
		writeError(w, err)
		return
	}
	f.Owner, f.AllOwners = s.visibility(r)
	b, release := s.current.Acquire()
	defer release()
	if b == nil {
		writeError(w, errNoHost())
		return
	}
	page, err := b.ListRuns(r.Context(), f)
	if err != nil {
		var we *wop.Error
		var se *host.StorageError
		switch {
		case errors.As(err, &we):
		case errors.As(err, &se), pgstore.Unavailable(err):
			// The database's errors are the log's, not the caller's.
			s.opts.Logger.Error("runs not listed", "error", err)
			err = wop.Errorf(wop.CodeUnavailable, "the runs cannot be listed now: their storage cannot be reached").WithRetryable(true)
		default:
			s.opts.Logger.Error("runs not listed", "error", err)
			err = wop.Errorf(wop.CodeInternal, "the runs cannot be listed; the host's log says why")
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// getRun serves GET /v1/runs/{runId}: the run's record, when the caller
// may see it (visibleRecord).
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	runID := r.PathValue("run")
	if strings.HasSuffix(runID, replaySuffix) {
		methodNotAllowed(w, r, "POST")
		return
	}
	if !host.IsRunID(runID) {
		writeError(w, errNotARunID())
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
	writeJSON(w, http.StatusOK, rec)
}
