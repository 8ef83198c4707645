package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/internal/atomicfile"
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
}

// ReadRunRecord reads a run record written by a run.
func ReadRunRecord(path string) (*RunRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRunRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read run record %s: %w", path, err)
	}
	if len(data) > maxRunRecordBytes {
		return nil, fmt.Errorf("run record %s is over %d bytes", path, maxRunRecordBytes)
	}
	var rec RunRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("run record %s: %w", path, err)
	}
	switch {
	case rec.TypeID == "":
		return nil, fmt.Errorf("run record %s: field typeId is empty", path)
	case len(rec.Input) == 0 || !json.Valid(rec.Input):
		return nil, fmt.Errorf("run record %s: field input is not JSON", path)
	}
	for i, p := range rec.Prompts {
		if p.PromptID == "" || p.Name == "" || p.Digest == "" {
			return nil, fmt.Errorf("run record %s: prompts[%d] lacks promptId, name or digest", path, i)
		}
	}
	return &rec, nil
}

// writeRunRecord writes rec to dir/<runId>.json through a synced temporary
// file and a rename, so a record is whole or absent, and syncs dir so that
// the record is durable before the run answers. synced, when not nil, is
// told of each sync (atomicfile.Hooks.Synced).
func writeRunRecord(dir string, rec *RunRecord, synced func(path string)) (path string, err error) {
	if rec.Prompts == nil {
		rec.Prompts = []dispatch.ResolvedPrompt{}
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode run record: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("run records: %w", err)
	}
	path = filepath.Join(dir, rec.RunID+".json")
	if err := atomicfile.WriteWithHooks(path, append(data, '\n'), 0o600, atomicfile.Hooks{Synced: synced}); err != nil {
		return "", fmt.Errorf("write run record: %w", err)
	}
	return path, nil
}

// record finishes a run's record and writes it when opts ask for one. It
// returns runErr unchanged: when the record cannot be written the node
// has run all the same, and a failure answered for a run whose effects
// happened would invite a retry that repeats them. The lost record is
// logged, counted (StateObserver.StateWriteFailed), named in
// res.RecordError, and makes the host refuse new runs until the state
// directory takes writes again.
func (h *Host) record(rec *RunRecord, trace *dispatch.PromptTrace, opts RunOptions, res *RunResult, runErr error) error {
	res.Prompts = trace.Resolved()
	if !opts.Record {
		return runErr
	}
	rec.FinishedAt = time.Now().UTC()
	rec.Prompts = res.Prompts
	rec.Outcome = OutcomeSucceeded
	if runErr != nil {
		rec.Outcome, rec.Error = OutcomeFailed, wop.AsError(runErr)
	}
	path, err := writeRunRecord(filepath.Join(h.cfg.Host.StateDir, RunsDir), rec, h.state.synced)
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
