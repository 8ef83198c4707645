package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/pgtest"
)

// claimsConfig is one host of three sharing a database, with a short
// claim lease: test.echo and the probe pack, nothing else.
const claimsConfig = `
host {
  plugin_dir = %[1]q
  state_dir  = %[2]q
  http {
    listen = "127.0.0.1:0"
  }
  storage {
    backend     = "postgres"
    dsn         = %[3]q
    claim_lease = %[4]q
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = %[5]q
  # The test has it write where the test looks, or start processes:
  # it runs uncontained (containment has its own tests).
  sandbox { enabled = false }
}
`

// keyedPost sends body to url under the idempotency key, from any
// goroutine, and waits at most two minutes for the answer; a request that
// fails is a reply of status 0.
func keyedPost(url, key, body string) reply {
	return keyedPostWithin(2*time.Minute, url, key, body)
}

// keyedPostWithin is keyedPost waiting at most d.
func keyedPostWithin(d time.Duration, url, key, body string) reply {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return reply{body: err.Error()}
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{body: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{status: resp.StatusCode, body: err.Error()}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// lines returns the lines of the file at path; none when it is absent.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// Three hosts on one database, a keyed request in flight on A, A killed
// with SIGKILL: while A lived, its claim outlived the lease it was made
// with (A renewed it) and B answered the key in flight; once A is dead,
// retries of the key through B and C at once are answered by a live host
// within about a lease, the node running once more, not twice; and the key
// then answers that run through every live host.
func TestClaimsFollowTheirHost(t *testing.T) {
	const lease = 3 * time.Second
	dsn := pgtest.DSN(t)
	probe := probePack(t)
	work := t.TempDir()
	hosts := map[string]*daemon{}
	names := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := map[string]string{}
	for _, name := range names {
		dir := t.TempDir()
		cfg := filepath.Join(dir, name+".hcl")
		text := fmt.Sprintf(claimsConfig, bin.dir, filepath.Join(dir, "state"), dsn, lease.String(), probe)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := startServeQuietly(cfg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures[name] = err.Error()
				return
			}
			hosts[name] = d
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, d := range hosts {
			if d.cmd.ProcessState == nil {
				_ = d.cmd.Process.Kill()
				_ = d.cmd.Wait()
			}
		}
	})
	if len(failures) > 0 {
		t.Fatalf("hosts that did not start: %v", failures)
	}

	// The node appends its pack's pid to runLog as it starts, and sleeps
	// until released exists (two minutes at most).
	runLog, released := filepath.Join(work, "runs.log"), filepath.Join(work, "released")
	input, _ := json.Marshal(map[string]any{"input": map[string]any{"ms": 120000, "inPack": true, "until": released, "log": runLog}})
	body := string(input)
	const key = "claims-follow-their-host-0001"
	execute := func(name string) reply { return keyedPost(hosts[name].base+"/v1/nodes/probe.sleep:execute", key, body) }

	inFlightOnA := make(chan reply, 1)
	go func() { inFlightOnA <- execute("a") }()
	waitUntil(t, "the node to start on A", func() bool { return len(lines(t, runLog)) == 1 })

	// Two leases later A's claim still holds the key: A renews it.
	time.Sleep(2 * lease)
	// A 409 is at once; a B that took the key over would run the node,
	// which waits for the release.
	if r := keyedPostWithin(30*time.Second, hosts["b"].base+"/v1/nodes/probe.sleep:execute", key, body); r.status != http.StatusConflict || !strings.Contains(r.body, "idempotency_in_flight") {
		t.Fatalf("the key through B while A runs it, two leases on: %d %s; want 409 idempotency_in_flight", r.status, r.body)
	}

	hosts["a"].stop(t, syscall.SIGKILL)
	if r := <-inFlightOnA; r.status != 0 {
		t.Fatalf("the request to the killed host answered %d %s", r.status, r.body)
	}
	// From now on a run of the node ends at once.
	if err := os.WriteFile(released, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// B and C are retried at once, as a client's retries through a
	// balancer are, until one of them answers the key: a run_timeout (10
	// minutes by default) would time the test out; a lease takes seconds.
	killed := time.Now()
	var answered reply
	var answeredBy string
	for answeredBy == "" {
		if time.Since(killed) > time.Minute {
			t.Fatalf("no live host answered the key within a minute of A's death (the lease is %s)", lease)
		}
		replies := map[string]reply{}
		var rw sync.WaitGroup
		for _, name := range []string{"b", "c"} {
			rw.Add(1)
			go func() {
				defer rw.Done()
				r := keyedPost(hosts[name].base+"/v1/nodes/probe.sleep:execute", key, body)
				mu.Lock()
				defer mu.Unlock()
				replies[name] = r
			}()
		}
		rw.Wait()
		for _, name := range []string{"b", "c"} {
			r := replies[name]
			switch {
			case r.status == http.StatusOK && answeredBy == "":
				answered, answeredBy = r, name
			case r.status == http.StatusOK:
			case r.status == http.StatusConflict && strings.Contains(r.body, "idempotency_in_flight"):
			default:
				t.Fatalf("retry through %s: %d %s", name, r.status, r.body)
			}
		}
		if answeredBy == "" {
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("%s answered the key %.1fs after A was killed (lease %s)", answeredBy, time.Since(killed).Seconds(), lease)
	var out outcome
	if err := json.Unmarshal([]byte(answered.body), &out); err != nil || out.Status == "failed" || !strings.Contains(string(out.Output), `"released":true`) {
		t.Fatalf("the answer through %s: %s", answeredBy, answered.body)
	}

	if runs := lines(t, runLog); len(runs) != 2 {
		t.Fatalf("the node started %d times (pids %v), want twice: once on A, once more after A died", len(runs), runs)
	}
	for _, name := range []string{"b", "c"} {
		r := execute(name)
		var again outcome
		if err := json.Unmarshal([]byte(r.body), &again); r.status != http.StatusOK || err != nil || again.RunID != out.RunID {
			t.Errorf("repeat through %s: %d %s; want run %s", name, r.status, r.body, out.RunID)
		}
	}
	if runs := lines(t, runLog); len(runs) != 2 {
		t.Errorf("the node started %d times after the repeats, want twice", len(runs))
	}
}
