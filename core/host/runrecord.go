package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/internal/canonjson"
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
	RunID string `json:"runId"`
	// NodeID is the node's id in the run, which a WebAssembly pack's
	// randomness is seeded from: a replay seeds it from the source's.
	NodeID      string `json:"nodeId,omitempty"`
	TypeID      string `json:"typeId"`
	Pack        string `json:"pack"`
	PackVersion string `json:"packVersion,omitempty"`
	// Input is the node's input as a JSON value: equal to what the node
	// received, though its whitespace may differ.
	Input      json.RawMessage `json:"input"`
	StartedAt  time.Time       `json:"startedAt"`
	FinishedAt time.Time       `json:"finishedAt"`
	// Outcome is "succeeded" or "failed"; Error is set when it failed,
	// Output when it succeeded: a replay answers a side-effect node with
	// them.
	Outcome string          `json:"outcome"`
	Error   *wop.Error      `json:"error,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
	// Owner is the scope of the credential the run was asked with
	// (RunOptions.IdempotencyScope); empty when it was asked without one.
	Owner string `json:"owner,omitempty"`
	// IdempotencyKey is the run's idempotency key
	// (RunOptions.IdempotencyKey), if it had one. Records written before
	// it was kept lack it and read all the same.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
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
	// Digest is "sha256:" and the hex SHA-256 of the record's canonical
	// JSON (RFC 8785) without this member, set when the record is written
	// and checked when it is read (checkRecordDigest).
	Digest string `json:"digest,omitempty"`
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

// Reasons a run record cannot be replayed from (details.reason of
// replay_source_missing).
const (
	// RecordTruncated: the record's JSON ends before its value does.
	RecordTruncated = "truncated"
	// RecordMalformed: the record is not JSON, or not a run record.
	RecordMalformed = "malformed"
	// RecordDigestMissing: the record carries no digest.
	RecordDigestMissing = "digest_missing"
	// RecordDigestMismatch: the record's content is not what its digest
	// was computed over: it was altered after it was written.
	RecordDigestMismatch = "digest_mismatch"
	// RecordLink: the record's file is a symbolic link, or no regular
	// file.
	RecordLink = "link"
)

// errRecordUnusable refuses a replay from the record of runID, which
// exists and cannot be trusted for reason: replay_source_missing, naming
// no file.
func errRecordUnusable(runID, reason, format string, args ...any) error {
	return wop.Errorf(dispatch.CodeReplaySourceMissing, "the record of run %s cannot be replayed: %s", runID, fmt.Sprintf(format, args...)).
		WithDetails(map[string]string{"runId": runID, "reason": reason})
}

// parseRunRecord checks a record's digest, then decodes and checks its
// bytes; name says which record in errors. A record that fails is
// replay_source_missing, its details.reason one of the Record* reasons.
func parseRunRecord(data []byte, name string) (*RunRecord, error) {
	if err := checkRecordDigest(data, name); err != nil {
		return nil, err
	}
	var rec RunRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, errRecordUnusable(name, RecordMalformed, "%v", err)
	}
	switch {
	case rec.TypeID == "":
		return nil, errRecordUnusable(name, RecordMalformed, "field typeId is empty")
	case len(rec.Input) == 0 || !json.Valid(rec.Input):
		return nil, errRecordUnusable(name, RecordMalformed, "field input is not JSON")
	}
	for i, p := range rec.Prompts {
		if p.PromptID == "" || p.Name == "" || p.Digest == "" {
			return nil, errRecordUnusable(name, RecordMalformed, "prompts[%d] lacks promptId, name or digest", i)
		}
	}
	return &rec, nil
}

// checkRecordDigest checks that data is one JSON object whose digest
// member is the digest of the rest (recordDigest).
func checkRecordDigest(data []byte, name string) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) && syn.Offset >= int64(len(bytes.TrimRight(data, " \t\r\n"))) {
			return errRecordUnusable(name, RecordTruncated, "it ends after %d bytes, before its JSON does", len(data))
		}
		return errRecordUnusable(name, RecordMalformed, "it is not a JSON object: %v", err)
	}
	raw, ok := members["digest"]
	if !ok {
		return errRecordUnusable(name, RecordDigestMissing, "it carries no digest, so nothing shows it is what was written")
	}
	var stated string
	if err := json.Unmarshal(raw, &stated); err != nil {
		return errRecordUnusable(name, RecordMalformed, "its digest is not a string")
	}
	delete(members, "digest")
	rest, err := json.Marshal(members)
	if err != nil {
		return errRecordUnusable(name, RecordMalformed, "%v", err)
	}
	got, err := recordDigest(rest)
	if err != nil {
		return errRecordUnusable(name, RecordMalformed, "%v", err)
	}
	if got != stated {
		return errRecordUnusable(name, RecordDigestMismatch, "its content does not match its digest: it changed after it was written")
	}
	return nil
}

// recordDigest is "sha256:" and the hex SHA-256 of the canonical form of
// the JSON text data.
func recordDigest(data []byte) (string, error) {
	canon, err := canonjson.Transform(data)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// encodeRunRecord is the bytes of rec as its file holds them, with its
// digest set.
func encodeRunRecord(rec *RunRecord) ([]byte, error) {
	if rec.Prompts == nil {
		rec.Prompts = []dispatch.ResolvedPrompt{}
	}
	rec.Digest = ""
	plain, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode run record: %w", err)
	}
	if rec.Digest, err = recordDigest(plain); err != nil {
		return nil, fmt.Errorf("encode run record: %w", err)
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
	if trace != nil {
		res.Prompts = trace.Resolved()
	}
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
	if !h.holdsSecret(res.Output) {
		// An output holding a configured secret is left out, as a logged
		// answer is: a replay of a side-effect node then fails with
		// replay_source_missing rather than answer without it.
		rec.Output = res.Output
	}
	if runErr != nil {
		rec.Outcome, rec.Error, rec.Output = OutcomeFailed, wop.AsError(runErr), nil
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
