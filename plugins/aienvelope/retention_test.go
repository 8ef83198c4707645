package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wophost/wophost/plugins/aienvelope/internal/wiretest"
	"github.com/wophost/wophost/plugins/aienvelope/store"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugin"
)

// clock is a settable time for the prune. reads counts the times it was
// read: the prune reads it once as it starts.
type clock struct{ ns, reads atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) now() time.Time {
	c.reads.Add(1)
	return time.Unix(0, c.ns.Load())
}

func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

// prunedSince waits until a whole prune has run since the call: the
// periodic prune runs one at a time, so once a second prune has read the
// clock the first one, which began after the call, is over.
func (c *clock) prunedSince(t *testing.T) {
	t.Helper()
	from := c.reads.Load()
	waitFor(t, func() bool { return c.reads.Load() >= from+2 })
}

// envelopeGone reports whether the store no longer holds envelope id.
func envelopeGone(h *harness, id string) bool {
	_, err := h.svc.current().store.Get(context.Background(), id)
	return errors.Is(err, store.ErrNotFound)
}

func TestRetentionSetting(t *testing.T) {
	for config, want := range map[string]time.Duration{
		`{}`:                                   defaultRetention,
		`{"retention":{}}`:                     defaultRetention,
		`{"retention":{"finished":"24h"}}`:     24 * time.Hour,
		`{"retention":{"finished":"720h"}}`:    720 * time.Hour,
		`{"retention":{"finished":"forever"}}`: 0,
	} {
		cfg, err := parseConfig(&plugin.ConfigureRequest{Config: json.RawMessage(config)})
		if err != nil {
			t.Errorf("%s: %v", config, err)
			continue
		}
		if cfg.retention != want {
			t.Errorf("%s: retention %s, want %s", config, cfg.retention, want)
		}
	}
}

// The periodic prune deletes what finished more than the retention ago,
// and a request repeated after that runs again: a new envelope, a second
// provider call. One that finished within the retention still answers
// from the store.
func TestPrunedRequestRunsAgain(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	clk := newClock(time.Now())
	h, err := tryConfigureWith(t, t.TempDir(), openaiConfig(srv.URL, `,"retention":{"finished":"24h"}`), func(s *service) {
		s.now, s.pruneEvery = clk.now, 5*time.Millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
	first := h.mustGenerate(t, fmt.Sprintf(hello, "kept-a-day"))
	// Within the retention the key answers from the store.
	clk.add(23 * time.Hour)
	clk.prunedSince(t)
	if again := h.mustGenerate(t, fmt.Sprintf(hello, "kept-a-day")); again.EnvelopeID != first.EnvelopeID || srv.Calls() != 1 {
		t.Fatalf("within the retention: envelope %s (want %s), provider calls %d (want 1)", again.EnvelopeID, first.EnvelopeID, srv.Calls())
	}
	clk.add(2 * time.Hour)
	waitFor(t, func() bool { return envelopeGone(h, first.EnvelopeID) })
	again := h.mustGenerate(t, fmt.Sprintf(hello, "kept-a-day"))
	if again.EnvelopeID == first.EnvelopeID || srv.Calls() != 2 {
		t.Errorf("after the prune: envelope %s (the pruned one was %s), provider calls %d (want 2)", again.EnvelopeID, first.EnvelopeID, srv.Calls())
	}
}

// Configure prunes before serving, and "forever" turns pruning off.
func TestConfigurePrunes(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	dir := t.TempDir()
	clk := newClock(time.Now())
	opts := func(s *service) { s.now = clk.now }
	h, err := tryConfigureWith(t, dir, openaiConfig(srv.URL, `,"retention":{"finished":"forever"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	first := h.mustGenerate(t, fmt.Sprintf(hello, "old"))
	h.svc.shutdown()

	clk.add(10 * 365 * 24 * time.Hour)
	h, err = tryConfigureWith(t, dir, openaiConfig(srv.URL, `,"retention":{"finished":"forever"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if envelopeGone(h, first.EnvelopeID) {
		t.Fatal(`retention "forever" pruned an envelope`)
	}
	h.svc.shutdown()

	h, err = tryConfigureWith(t, dir, openaiConfig(srv.URL, `,"retention":{"finished":"168h"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !envelopeGone(h, first.EnvelopeID) {
		t.Error("Configure did not prune an envelope ten years past the retention")
	}
}

// A second plugin process on the same state directory is refused, and
// refused before it touches the first one's envelopes: recovering them
// would release the call the first is still completing, and that
// call's result would be lost (its replay calling the provider again).
func TestSecondProcessLeavesTheFirstsEnvelopesAlone(t *testing.T) {
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{})
	var openGate sync.Once
	release := func() { openGate.Do(func() { close(srv.Gate) }) }
	// The server's Close waits for the gated call, so a failure below
	// must open the gate too.
	t.Cleanup(release)
	dir := t.TempDir()
	cfg := openaiConfig(srv.URL, "")
	h := configured(t, dir, cfg)
	var wg sync.WaitGroup
	var (
		res  aienvelope.GenerateResult
		gerr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var in aienvelope.GenerateRequest
		_ = json.Unmarshal([]byte(fmt.Sprintf(hello, "in-flight")), &in)
		out, err := h.svc.Generate(context.Background(), nil, &in)
		if gerr = err; err == nil {
			gerr = sent(out, &res)
		}
	}()
	waitFor(t, func() bool { return srv.Calls() == 1 })

	start := time.Now()
	_, err := tryConfigureWith(t, dir, cfg, func(s *service) { s.lockWait = 300 * time.Millisecond })
	if err == nil || !strings.Contains(err.Error(), "in use by another process") || !strings.Contains(err.Error(), "aienvelope.db.lock") {
		t.Fatalf("second configure on the same store: %v", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("gave up after %s, before the lock wait", waited)
	}

	release()
	wg.Wait()
	if gerr != nil {
		t.Fatalf("the call in flight: %v", gerr)
	}
	replay := h.mustGenerate(t, fmt.Sprintf(hello, "in-flight"))
	if replay.EnvelopeID != res.EnvelopeID || srv.Calls() != 1 {
		t.Errorf("the first plugin's call: replay %s (want %s), provider calls %d (want 1)", replay.EnvelopeID, res.EnvelopeID, srv.Calls())
	}
}

// A store the previous version created, without incremental auto-vacuum,
// is rewritten once at Configure so that it can shrink from then on; its
// envelopes are kept.
func TestConfigureConvertsAnOldStore(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, storeFile)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if _, err := db.Exec(`CREATE TABLE envelopes (key TEXT PRIMARY KEY, digest TEXT NOT NULL, id TEXT NOT NULL UNIQUE, type TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending','completed','failed')), async INTEGER NOT NULL, request BLOB NOT NULL,
  result BLOB, error BLOB, created_at INTEGER NOT NULL, finished_at INTEGER);
INSERT INTO envelopes VALUES ('k', 'd', 'env_old', 't', 'completed', 0, '{}', '{"status":"completed"}', NULL, ?, ?)`, now, now); err != nil {
		t.Fatal(err)
	}
	db.Close()

	h := configured(t, dir, `{}`)
	st := h.svc.current().store.(*store.Store)
	if inc, err := st.Incremental(context.Background()); err != nil || !inc {
		t.Errorf("the old store after Configure: incremental %v %v", inc, err)
	}
	if e, err := st.Get(context.Background(), "env_old"); err != nil || string(e.Result) != `{"status":"completed"}` {
		t.Errorf("the old store's envelope after the rewrite: %+v %v", e, err)
	}
}
