package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/plugins/aienvelope/internal/wiretest"
	"github.com/wophost/wophost/plugins/aienvelope/store"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// pgSchema is the schema the hosts of one test share.
const pgSchema = "wophost_aienvelope"

// host configures a service on the postgres backend at dsn, as one host's
// plugin process; adjust, when set, changes the service first.
func host(t *testing.T, dsn, config string, adjust func(*service)) *harness {
	t.Helper()
	svc := &service{logger: hclog.NewNullLogger(), sleep: (&sleeps{}).sleep, rand: func() float64 { return 0.5 }}
	if adjust != nil {
		adjust(svc)
	}
	if err := plugin.CheckConfig(configSchema(), json.RawMessage(config)); err != nil {
		t.Fatal(err)
	}
	req := &plugin.ConfigureRequest{Config: json.RawMessage(config), StateDir: t.TempDir(),
		Storage: plugin.Storage{Backend: plugin.StoragePostgres, DSN: dsn, MaxConnections: 8, Schema: pgSchema}}
	if err := svc.configure(context.Background(), req); err != nil {
		t.Fatalf("configure: %v", err)
	}
	t.Cleanup(svc.shutdown)
	return &harness{svc: svc}
}

// abandon stops the instance's renewal, sweeper and listener, leaving its
// pending envelopes to the other hosts once their leases pass, as a
// killed process would; its calls and jobs in flight go on.
func (in *instance) abandon() {
	in.coordCancel()
	in.coord.Wait()
}

// asyncConfig is openaiConfig with async on and the given async settings.
func asyncConfig(url, async string) string {
	return openaiConfig(url, `,"async":{"enabled":true`+async+`}`)
}

// The same key through two hosts at once: one provider call, one
// envelope for every caller; another request under the key is refused.
func TestPostgresTwinsAcrossHosts(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{})
	hosts := []*harness{host(t, dsn, openaiConfig(srv.URL, ""), nil), host(t, dsn, openaiConfig(srv.URL, ""), nil)}
	results := make([]aienvelope.GenerateResult, 8)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := hosts[i%2].svc.call(fmt.Sprintf(hello, "twin"))
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
				return
			}
			_ = sent(out, &results[i])
		}()
	}
	waitFor(t, func() bool { return srv.Calls() == 1 })
	close(srv.Gate)
	wg.Wait()
	for i, r := range results {
		if r.EnvelopeID == "" || r.EnvelopeID != results[0].EnvelopeID || r.Text != "Paris is the capital of France." {
			t.Errorf("caller %d: %+v (first %s)", i, r, results[0].EnvelopeID)
		}
	}
	if n := srv.Calls(); n != 1 {
		t.Errorf("provider called %d times, want 1", n)
	}
	_, err := hosts[1].generate(t, `{"envelopeType":"answer","userMessage":"Capital of Spain?","idempotencyKey":"twin"}`)
	wantCode(t, err, "idempotency_key_mismatch", "twin")
}

// A host with job_workers = 0 accepts a job and runs none: another host
// runs it, and an await through either host gets its result.
func TestPostgresJobOfAnAPIOnlyHost(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := wiretest.NewServer(t, "openai_success")
	api := host(t, dsn, asyncConfig(srv.URL, `,"job_workers":0,"job_lease":"1s"`), nil)
	p := api.mustGenerate(t, `{"envelopeType":"a","userMessage":"x","idempotencyKey":"j1","async":true}`)
	if p.Status != "pending" {
		t.Fatalf("accepted %+v", p)
	}
	if w := api.mustAwait(t, p.EnvelopeID, 300); w.Status != "pending" || srv.Calls() != 0 {
		t.Fatalf("the API-only host ran its job: %+v, %d provider calls", w, srv.Calls())
	}
	worker := host(t, dsn, asyncConfig(srv.URL, `,"job_lease":"1s"`), nil)
	done := worker.mustAwait(t, p.EnvelopeID, 20000)
	if done.Status != "completed" || done.EnvelopeID != p.EnvelopeID {
		t.Fatalf("await through the worker: %+v", done)
	}
	if again := api.mustAwait(t, p.EnvelopeID, 20000); again.Status != "completed" || again.Text != done.Text {
		t.Fatalf("await through the accepting host: %+v", again)
	}
	if n := srv.Calls(); n != 1 {
		t.Errorf("provider called %d times, want 1", n)
	}
}

// A job whose host stops renewing its lease mid-call (killed) is taken
// over by another host once the lease passed and run again there; the
// first host, finishing late, cannot overwrite the result. Each host has
// a provider of its own, so the test knows whose call is whose.
func TestPostgresJobOfAStoppedHostIsTakenOver(t *testing.T) {
	dsn := pgtest.DSN(t)
	srvA := wiretest.NewServer(t, "openai_success")
	srvA.Gate = make(chan struct{})
	srvB := wiretest.NewServer(t, "openai_429_insufficient_quota")
	const jobs = `,"job_workers":1,"job_lease":"1s"`
	a := host(t, dsn, asyncConfig(srvA.URL, jobs), nil)
	p := a.mustGenerate(t, `{"envelopeType":"a","userMessage":"x","idempotencyKey":"k1","async":true}`)
	waitFor(t, func() bool { return srvA.Calls() == 1 })
	a.svc.current().abandon()
	start := time.Now()
	b := host(t, dsn, asyncConfig(srvB.URL, jobs), nil)
	_, err := b.await(t, p.EnvelopeID, 20000)
	wantCode(t, err, "provider_quota_exhausted", "quota")
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("taken over after %s, before the lease could pass", d)
	}
	// The stopped host's call answers now; its finish must not replace
	// the record of the host that took the job over.
	close(srvA.Gate)
	a.svc.current().jobs.Wait()
	_, err = a.await(t, p.EnvelopeID, 0)
	wantCode(t, err, "provider_quota_exhausted", "quota")
	if srvA.Calls() != 1 || srvB.Calls() != 1 {
		t.Errorf("provider calls %d and %d, want one on each host", srvA.Calls(), srvB.Calls())
	}
}

// A host running a job renews its lease, so no other host takes the job
// over however long it runs.
func TestPostgresRunningJobKeepsItsLease(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := wiretest.NewServer(t, "openai_success")
	srv.Gate = make(chan struct{})
	cfg := asyncConfig(srv.URL, `,"job_lease":"1s"`)
	a := host(t, dsn, cfg, nil)
	host(t, dsn, cfg, nil)
	p := a.mustGenerate(t, `{"envelopeType":"a","userMessage":"x","idempotencyKey":"k1","async":true}`)
	time.Sleep(3 * time.Second)
	close(srv.Gate)
	if done := a.mustAwait(t, p.EnvelopeID, 20000); done.Status != "completed" {
		t.Fatalf("await %+v", done)
	}
	if n := srv.Calls(); n != 1 {
		t.Errorf("provider called %d times, want 1", n)
	}
}

// A synchronous call in flight on a host that died is released once its
// lease passed, so the caller's retry through another host runs it.
func TestPostgresSyncCallOfAStoppedHostIsReleased(t *testing.T) {
	dsn := pgtest.DSN(t)
	srvA := wiretest.NewServer(t, "openai_success")
	srvA.Gate = make(chan struct{})
	srvB := wiretest.NewServer(t, "openai_success")
	a := host(t, dsn, openaiConfig(srvA.URL, `,"async":{"job_lease":"1s"}`), nil)
	first := make(chan struct{})
	defer func() { close(srvA.Gate); <-first }()
	go func() {
		defer close(first)
		_, _ = a.svc.call(fmt.Sprintf(hello, "s1"))
	}()
	waitFor(t, func() bool { return srvA.Calls() == 1 })
	a.svc.current().abandon()
	b := host(t, dsn, openaiConfig(srvB.URL, `,"async":{"job_lease":"1s"}`), nil)
	// B waits for the stopped host's call until the sweeper releases it,
	// then runs it itself.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := b.generateCtx(t, ctx, fmt.Sprintf(hello, "s1"))
	if err != nil {
		t.Fatalf("retry through another host: %v", err)
	}
	if res.Status != "completed" || srvB.Calls() != 1 {
		t.Fatalf("retry through another host: %+v, its provider calls %d (want 1)", res, srvB.Calls())
	}
}

// An await on one host wakes when another host finishes the job: at once
// by a notification, and by polling when notifications are lost.
func TestPostgresAwaitThroughAnotherHost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		adjust func(*service)
		within time.Duration
	}{
		{"notified", func(s *service) { s.pollEvery = time.Hour }, 5 * time.Second},
		{"polled", func(s *service) { s.noListen = true; s.pollEvery = 100 * time.Millisecond }, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			srv := wiretest.NewServer(t, "openai_success")
			srv.Gate = make(chan struct{})
			a := host(t, dsn, asyncConfig(srv.URL, ""), nil)
			b := host(t, dsn, asyncConfig(srv.URL, `,"job_workers":0`), tc.adjust)
			p := a.mustGenerate(t, `{"envelopeType":"a","userMessage":"x","idempotencyKey":"w1","async":true}`)
			waitFor(t, func() bool { return srv.Calls() == 1 })
			type answer struct {
				res aienvelope.GenerateResult
				at  time.Time
			}
			got := make(chan answer, 1)
			go func() {
				res := b.mustAwait(t, p.EnvelopeID, 60000)
				got <- answer{res, time.Now()}
			}()
			time.Sleep(200 * time.Millisecond) // the await is waiting
			close(srv.Gate)
			waitFor(t, func() bool {
				e, err := a.svc.current().store.Get(context.Background(), p.EnvelopeID)
				return err == nil && e.State == store.StateCompleted
			})
			finished := time.Now()
			select {
			case ans := <-got:
				if ans.res.Status != "completed" {
					t.Fatalf("await %+v", ans.res)
				}
			case <-time.After(tc.within):
				t.Fatalf("the await on the other host did not wake within %s of the finish (finished %s)", tc.within, finished.Format(time.StampMilli))
			}
		})
	}
}

// Prune on the postgres backend deletes what finished before the
// retention, whichever host finished it.
func TestPostgresPrunes(t *testing.T) {
	dsn := pgtest.DSN(t)
	clk := newClock(time.Now())
	a := host(t, dsn, `{}`, func(s *service) { s.now = clk.now })
	res := a.mustGenerate(t, fmt.Sprintf(hello, "p1"))
	clk.add(8 * 24 * time.Hour)
	b := host(t, dsn, `{}`, func(s *service) { s.now = clk.now }) // Configure prunes
	if _, err := b.svc.current().store.Get(context.Background(), res.EnvelopeID); err == nil {
		t.Fatal("the envelope past the retention is still there")
	}
}

// With the database down, calls fail unavailable and retryable; what was
// acknowledged before is there when it is back.
func TestPostgresDatabaseDown(t *testing.T) {
	srv := pgtest.StartPrivate(t)
	provider := wiretest.NewServer(t, "openai_success")
	h := host(t, srv.DSN(), openaiConfig(provider.URL, ""), nil)
	done := h.mustGenerate(t, fmt.Sprintf(hello, "d1"))
	srv.Stop()
	_, err := h.generate(t, fmt.Sprintf(hello, "d2"))
	wantCode(t, err, "unavailable", "aiEnvelope store")
	if !wop.IsRetryable(err) {
		t.Errorf("%+v is not retryable", err)
	}
	srv.Start()
	var again aienvelope.GenerateResult
	waitFor(t, func() bool {
		res, err := h.generate(t, fmt.Sprintf(hello, "d1"))
		again = res
		return err == nil
	})
	if again.EnvelopeID != done.EnvelopeID || provider.Calls() != 1 {
		t.Errorf("after the restart: envelope %s (want %s), provider calls %d (want 1)", again.EnvelopeID, done.EnvelopeID, provider.Calls())
	}
}
