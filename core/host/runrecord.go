package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/sdk/wop"
)

// RunsDir is the directory under the host's state_dir that holds run
// records.
const RunsDir = "runs"

// maxRunRecordBytes bounds a run record read back for a replay: the input
// is bounded by the message size, the rest is small.
const maxRunRecordBytes = 1 << 30

// Run outcomes in a record.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
)

// RunRecord is what one node run leaves in state_dir/runs/<runId>.json:
// enough to run the node again with the same input and the same prompt
// bytes (`host run --replay`).
type RunRecord struct {
	RunID       string `json:"runId"`
	TypeID      string `json:"typeId"`
	Pack        string `json:"pack"`
	PackVersion string `json:"packVersion,omitempty"`
	// Input is the node's input as a JSON value: equal to what the node
	// received, though its whitespace may differ.
	Input      json.RawMessage `json:"input"`
	StartedAt  time.Time       `json:"startedAt"`
	FinishedAt time.Time       `json:"finishedAt"`
	// Outcome is "succeeded" or "failed"; Error is set when it failed.
	Outcome string     `json:"outcome"`
	Error   *wop.Error `json:"error,omitempty"`
	// ReplayOf is the run id this run replayed, if any.
	ReplayOf string `json:"replayOf,omitempty"`
	// Prompts lists every prompt the run resolved, each reference once.
	Prompts []dispatch.ResolvedPrompt `json:"prompts"`
	// Invocations is the run's invocation log: every host-service call
	// the node made, and the callbacks of the plugins it called, with
	// their outcomes. A replay answers from it.
	Invocations *dispatch.InvocationLog `json:"invocations,omitempty"`
	// Replay says what a replay did with each call (served from its
	// source's log, run live, diverged); set on a replay's record.
	Replay *dispatch.ReplaySummary `json:"replay,omitempty"`
}

// ReadRunRecord reads a run record written by a run to a file.
func ReadRunRecord(path string) (*RunRecord, error) {
	data, err := readRunRecordFile(path)
	if err != nil {
		return nil, err
	}
	return parseRunRecord(data, path)
}

// RunRecord returns the record of run runID from the host's storage: the
// file state_dir/runs/<runId>.json with the embedded backend, the table
// of the host's schema with postgres, where a record any host on the
// database wrote is found. An error matching fs.ErrNotExist means there
// is none (never written, or pruned by retention).
func (h *Host) RunRecord(ctx context.Context, runID string) (*RunRecord, error) {
	if !IsRunID(runID) {
		return nil, errNotARunID(runID)
	}
	store, err := h.state.runRecords(ctx)
	if err != nil {
		return nil, err
	}
	data, err := store.get(ctx, runID)
	if err != nil {
		return nil, err
	}
	return parseRunRecord(data, runID)
}

// errNotARunID refuses an id outside the run id grammar before any file
// or row is looked up: not_found, matching fs.ErrNotExist too, and
// quoting none of the id, which may be long.
func errNotARunID(runID string) error {
	return errors.Join(wop.Errorf(wop.CodeNotFound,
		"no run has this id (%d bytes): a run id is run_ and 1 to %d lowercase hex digits", len(runID), MaxRunIDHexDigits), fs.ErrNotExist)
}

// parseRunRecord decodes and checks a record's bytes; name says which
// record in errors.
func parseRunRecord(data []byte, name string) (*RunRecord, error) {
	var rec RunRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("run record %s: %w", name, err)
	}
	switch {
	case rec.TypeID == "":
		return nil, fmt.Errorf("run record %s: field typeId is empty", name)
	case len(rec.Input) == 0 || !json.Valid(rec.Input):
		return nil, fmt.Errorf("run record %s: field input is not JSON", name)
	}
	for i, p := range rec.Prompts {
		if p.PromptID == "" || p.Name == "" || p.Digest == "" {
			return nil, fmt.Errorf("run record %s: prompts[%d] lacks promptId, name or digest", name, i)
		}
	}
	return &rec, nil
}

// encodeRunRecord is the bytes of rec as its file holds them.
func encodeRunRecord(rec *RunRecord) ([]byte, error) {
	if rec.Prompts == nil {
		rec.Prompts = []dispatch.ResolvedPrompt{}
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode run record: %w", err)
	}
	return append(data, '\n'), nil
}

// writeRunRecord writes rec to dir/<runId>.json (fileRunRecords.put).
// synced, when not nil, is told of each sync (atomicfile.Hooks.Synced).
func writeRunRecord(dir string, rec *RunRecord, synced func(path string)) (path string, err error) {
	data, err := encodeRunRecord(rec)
	if err != nil {
		return "", err
	}
	return (&fileRunRecords{dir: dir, synced: synced}).put(context.Background(), rec.RunID, data)
}

// record finishes a run's record and writes it when opts ask for one. It
// returns runErr unchanged: when the record cannot be written the node
// has run all the same, and a failure answered for a run whose effects
// happened would invite a retry that repeats them. The lost record is
// logged, counted (StateObserver.StateWriteFailed), named in
// res.RecordError, and makes the host refuse new runs until the state
// directory (or the database) takes writes again.
func (h *Host) record(rec *RunRecord, trace *dispatch.PromptTrace, calls *dispatch.RunLog, opts RunOptions, res *RunResult, runErr error) error {
	res.Prompts = trace.Resolved()
	if calls != nil {
		res.Replay = calls.Summary()
	}
	if !opts.Record {
		return runErr
	}
	rec.FinishedAt = time.Now().UTC()
	rec.Prompts = res.Prompts
	if calls != nil {
		rec.Invocations = calls.Log()
		rec.Replay = res.Replay
	}
	rec.Outcome = OutcomeSucceeded
	if runErr != nil {
		rec.Outcome, rec.Error = OutcomeFailed, wop.AsError(runErr)
	}
	path, err := h.state.writeRunRecord(rec)
	if err != nil {
		h.logger.Error("run record not written; the run's outcome stands", "run_id", rec.RunID, "type_id", rec.TypeID,
			"outcome", rec.Outcome, "error", err)
		h.state.writeFailed(StoreRunRecords, err)
		res.RecordError = err.Error()
		return runErr
	}
	res.RecordPath = path
	return runErr
}

// promptLockMap returns the prompts lock map of the loaded pack named
// pack, for PromptPolicy.
func (h *Host) promptLockMap(pack string) map[string]string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, p := range h.packs {
		if p.Name == pack && p.manifest != nil && p.State != PackRefused {
			return p.manifest.Prompts
		}
	}
	return nil
}
