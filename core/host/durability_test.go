package host

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/dispatch"
)

// A run's record is on disk before the run answers: the record and the
// directory entry that names it are synced before record returns. A kill
// test cannot see a missing sync, since the page cache outlives the
// process, so the write reports each sync it made.
func TestRunRecordSyncedBeforeTheRunAnswers(t *testing.T) {
	cfg := config.Host{StateDir: t.TempDir(), MaxMessageBytes: 64 << 10, RunTimeout: time.Minute, Retention: config.DefaultRetention()}
	h := &Host{cfg: &config.Config{Host: cfg}, logger: hclog.NewNullLogger()}
	h.state = newStateFor(cfg, h.logger, func(string) bool { return false }, func() StateObserver { return nil })
	var mu sync.Mutex
	var synced []string
	h.state.synced = func(path string) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, path)
	}
	rec := &RunRecord{RunID: "run_1", TypeID: "demo.node", Pack: "demo.pack", Input: json.RawMessage(`{}`), StartedAt: time.Now().UTC()}
	var res RunResult
	if err := h.record(rec, &dispatch.PromptTrace{}, nil, RunOptions{Record: true}, &res, nil); err != nil {
		t.Fatal(err)
	}
	if res.RecordError != "" {
		t.Fatalf("record error: %s", res.RecordError)
	}
	mu.Lock()
	got := slices.Clone(synced)
	mu.Unlock()
	dir := filepath.Join(cfg.StateDir, RunsDir)
	file := filepath.Join(dir, "run_1.json")
	if res.RecordPath != file {
		t.Fatalf("record path %s, want %s", res.RecordPath, file)
	}
	fileAt, dirAt := slices.Index(got, file), slices.Index(got, dir)
	if fileAt < 0 || dirAt < 0 || fileAt > dirAt {
		t.Errorf("synced %v before the run answered: want %s, then %s", got, file, dir)
	}
}
