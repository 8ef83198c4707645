package host

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/sdk/wop"
)

func TestRunRecordRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	rec := &RunRecord{
		RunID: "run_1", TypeID: "demo.node", Pack: "demo.pack", Input: json.RawMessage(`{"q":"café"}`),
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), FinishedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC),
		Outcome: OutcomeFailed, Error: wop.Errorf("prompt_version_not_found", "gone"),
		Prompts: []dispatch.ResolvedPrompt{{PromptID: "sys", Pin: "sys@1#sha256:" + strings.Repeat("0", 64), Name: "sys", Version: "1", Digest: "sha256:" + strings.Repeat("0", 64)}},
	}
	path, err := writeRunRecord(dir, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "run_1.json") {
		t.Errorf("path = %s", path)
	}
	got, err := ReadRunRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	// The input is kept as a JSON value: equal, though re-indented.
	if got.TypeID != rec.TypeID || !sameJSON(got.Input, rec.Input) || got.Error.Code != "prompt_version_not_found" ||
		len(got.Prompts) != 1 || got.Prompts[0] != rec.Prompts[0] || !got.StartedAt.Equal(rec.StartedAt) {
		t.Errorf("read back %+v", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestReadRunRecordRefusesBadRecords(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"notjson":   `{`,
		"notype":    `{"runId":"r","input":{}}`,
		"noinput":   `{"runId":"r","typeId":"a.b"}`,
		"unknown":   `{"runId":"r","typeId":"a.b","input":{},"extra":1}`,
		"badprompt": `{"runId":"r","typeId":"a.b","input":{},"prompts":[{"promptId":"x"}]}`,
	} {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadRunRecord(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ReadRunRecord(filepath.Join(dir, "missing.json")); !os.IsNotExist(err) {
		t.Errorf("missing record: %v", err)
	}
}

// A run id outside the grammar is not_found before any file is touched:
// the state directory here is a file, so any lookup would fail otherwise.
func TestRunRecordChecksTheIDFirst(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(stateDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := New(&config.Config{Host: config.Host{
		StateDir: stateDir, MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention(),
	}}, config.NewLoader(), hclog.NewNullLogger(), "test")
	for _, id := range []string{"run_" + strings.Repeat("f", MaxRunIDHexDigits+1), "run_" + strings.Repeat("f", 5000), "run_", "run_F", "run_1/../x"} {
		_, err := h.RunRecord(context.Background(), id)
		if wop.CodeOf(err) != wop.CodeNotFound || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%d-byte id: %.200v; want not_found", len(id), err)
		}
		if err != nil && (strings.Contains(err.Error(), stateDir) || strings.Contains(err.Error(), "ffffffff")) {
			t.Errorf("%d-byte id: the error names the path or the id: %.200v", len(id), err)
		}
	}
	// At the bound the store is looked up (and fails here, on the file).
	if _, err := h.RunRecord(context.Background(), "run_"+strings.Repeat("f", MaxRunIDHexDigits)); wop.CodeOf(err) == wop.CodeNotFound {
		t.Errorf("an id at the bound was refused as malformed: %v", err)
	}
}

// A record keeps its run's idempotency key under its digest: read back
// as written, and a record whose key was changed afterwards is refused.
// A record written before records kept keys reads without one.
func TestRunRecordKeepsTheIdempotencyKey(t *testing.T) {
	rec := &RunRecord{RunID: "run_1", TypeID: "demo.node", Input: json.RawMessage(`{}`), IdempotencyKey: "key-0123456789abcdef", Outcome: OutcomeSucceeded}
	data, err := encodeRunRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseRunRecord(data, "run_1")
	if err != nil || got.IdempotencyKey != rec.IdempotencyKey {
		t.Fatalf("read back %+v, %v", got, err)
	}
	altered := strings.Replace(string(data), "key-0123456789abcdef", "key-0123456789abcdeg", 1)
	if _, err := parseRunRecord([]byte(altered), "run_1"); err == nil {
		t.Fatal("a record whose key changed was accepted")
	}
	rec.IdempotencyKey = ""
	if data, err = encodeRunRecord(rec); err != nil || strings.Contains(string(data), "idempotencyKey") {
		t.Fatalf("a record without a key: %s, %v", data, err)
	}
	if got, err := parseRunRecord(data, "run_1"); err != nil || got.IdempotencyKey != "" {
		t.Fatalf("a record without a key read back %+v, %v", got, err)
	}
}
