package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/internal/pgtest"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// dbSetup is a host config on the postgres storage backend of a private
// server: the prompt library, which keeps its prompts there, the echo
// test plugin, which needs no database, and the probe pack.
type dbSetup struct {
	cfg    string
	server *pgtest.Server
}

func newDBSetup(t *testing.T) *dbSetup {
	t.Helper()
	s := &dbSetup{server: pgtest.StartPrivate(t)}
	s.cfg = writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  http { listen = "127.0.0.1:0" }
  storage {
    backend = "postgres"
    dsn     = %q
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
}
pack "private.wophost.probe" { path = %q }
`, s.server.DSN(), binary(t, "./plugins/promptlib"), probePack(t)))
	return s
}

// servedRecords is GET /v1/plugins by capability name.
func servedRecords(t *testing.T, d *daemon) map[string]record {
	t.Helper()
	r := request(t, "GET", d.base+"/v1/plugins", "", nil)
	if r.status != 200 {
		t.Fatalf("GET /v1/plugins: %d %s", r.status, r.body)
	}
	var recs []struct {
		record
		Restarts int `json:"restarts"`
	}
	if err := json.Unmarshal([]byte(r.body), &recs); err != nil {
		t.Fatalf("decode plugins: %v\n%s", err, r.body)
	}
	out := map[string]record{}
	for _, rec := range recs {
		if rec.Restarts != 0 {
			t.Errorf("capability %s restarted %d times; nothing should have been restarted", rec.Name, rec.Restarts)
		}
		out[rec.Name] = rec.record
	}
	return out
}

// waitForServedState polls GET /v1/plugins until capability name is in state.
func waitForServedState(t *testing.T, d *daemon, name, state string, within time.Duration) record {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec := servedRecords(t, d)[name]
		if rec.State == state {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("capability %s is %q after %s, want %q: %+v\n%s", name, rec.State, within, state, rec, d.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// advertises reports whether the served advertisement names family.
func advertises(t *testing.T, d *daemon, family string) bool {
	t.Helper()
	r := request(t, "GET", d.base+"/.well-known/openwop", "", nil)
	if r.status != 200 {
		t.Fatalf("GET /.well-known/openwop: %d %s", r.status, r.body)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatal(err)
	}
	_, ok := doc[family]
	return ok
}

// runOutcome is a node's run outcome as POST /v1/nodes/...:execute answers it.
type runOutcome struct {
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
}

// call runs probe.call of family.method with payload on the served host.
func call(t *testing.T, d *daemon, family, method string, payload any) runOutcome {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input": map[string]any{"family": family, "method": method, "payload": payload}})
	r := request(t, "POST", d.base+"/v1/nodes/probe.call:execute", string(body), nil)
	var out runOutcome
	if r.status != 200 || json.Unmarshal([]byte(r.body), &out) != nil {
		t.Fatalf("probe.call %s.%s: %d %s", family, method, r.status, r.body)
	}
	return out
}

// dbAnswer runs probe.call of family.method on the served host and
// returns the run outcome, or, when the host refused the run because its
// own database (its run records live there) cannot be reached, a failed
// outcome with that refusal's code. Any other answer fails t.
func dbAnswer(t *testing.T, d *daemon, family, method string, payload any) runOutcome {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input": map[string]any{"family": family, "method": method, "payload": payload}})
	r := request(t, "POST", d.base+"/v1/nodes/probe.call:execute", string(body), nil)
	var out runOutcome
	if r.status == 200 && json.Unmarshal([]byte(r.body), &out) == nil {
		return out
	}
	var e struct {
		Error   string `json:"error"`
		Details struct {
			Retryable bool   `json:"retryable"`
			Storage   string `json:"storage"`
		} `json:"details"`
	}
	if r.status != 503 || json.Unmarshal([]byte(r.body), &e) != nil || e.Error != storageUnavailable ||
		!e.Details.Retryable || e.Details.Storage != "database" {
		t.Fatalf("probe.call %s.%s: %d %s", family, method, r.status, r.body)
	}
	out.Status, out.Error.Code, out.Error.Retryable = "failed", e.Error, true
	return out
}

// storageUnavailable is the host's refusal of a run while its storage
// cannot take writes.
const storageUnavailable = "wophost.storage_unavailable"

// getPrompt is promptLibrary.get of id through a node on the served host.
func getPrompt(t *testing.T, d *daemon, id string) runOutcome {
	t.Helper()
	return call(t, d, "promptLibrary", "get", map[string]string{"promptId": id})
}

const dbPrompt = "---\nname: db/greeting\n---\nGreet the user.\n"

// dbUnreadPrompt is a prompt no call reads while the database is up.
const dbUnreadPrompt = "---\nname: db/unread\n---\nSay goodbye.\n"

// checkGot fails unless out is dbPrompt as published.
func checkGot(t *testing.T, what string, out runOutcome) {
	t.Helper()
	var p promptlibrary.Prompt
	if out.Status != "succeeded" || json.Unmarshal(out.Output, &p) != nil || p.Raw != dbPrompt {
		t.Fatalf("%s: %+v %s", what, out, out.Output)
	}
}

// The database down when the host starts: the prompt library is waiting,
// with the reason, and not advertised, while the rest serves; a one-shot
// command stops at once. Once the database is up the waiting capability
// becomes ready and advertised by itself, without a restart.
func TestDatabaseDownAtStart(t *testing.T) {
	s := newDBSetup(t)
	s.server.Stop()

	recs := pluginRecords(t, s.cfg)
	if r := recs["prompts"]; r.State != "waiting" || r.LastError == "" || len(r.Advertised) != 0 {
		t.Fatalf("host plugins, database down: prompts %+v, want waiting with the reason", r)
	}
	if r := recs["echo"]; r.State != "ready" {
		t.Fatalf("host plugins, database down: echo %+v, want ready", r)
	}
	res := runHost(t, "", "--config", s.cfg, "plugins")
	if res.code != 0 || !strings.Contains(res.stdout, "waiting") {
		t.Fatalf("host plugins: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	t0 := time.Now()
	res = runHost(t, `{"promptId":"db/greeting@1"}`, "--config", s.cfg, "call", "promptLibrary.get", "--input", "-")
	if res.code != 1 || !strings.Contains(res.stderr, "capability waiting") || time.Since(t0) > 30*time.Second {
		t.Fatalf("host call, database down: exit %d after %s\n%s%s", res.code, time.Since(t0), res.stdout, res.stderr)
	}

	d := startServe(t, s.cfg)
	rec := waitForServedState(t, d, "prompts", "waiting", 10*time.Second)
	if rec.LastError == "" || len(rec.Advertised) != 0 {
		t.Fatalf("served record while the database is down: %+v", rec)
	}
	if advertises(t, d, "promptLibrary") || !strings.Contains(request(t, "GET", d.base+"/.well-known/openwop", "", nil).body, "test.echo") {
		t.Fatal("the advertisement while the database is down is not the echo family alone")
	}
	// The host keeps its run records in the same database, so it runs no
	// node until the database is back, not even one that needs none.
	if out := dbAnswer(t, d, "test.echo", "echo", map[string]int{"n": 1}); out.Error.Code != storageUnavailable {
		t.Fatalf("echo while the database is down: %+v, want the host's refusal", out)
	}

	s.server.Start()
	// The backoff has grown while the server started; it is capped at 30 s.
	rec = waitForServedState(t, d, "prompts", "ready", 45*time.Second)
	if !slices.Contains(rec.Advertised, "promptLibrary") || !advertises(t, d, "promptLibrary") {
		t.Fatalf("ready but not advertised: %+v", rec)
	}
	if pub := runHost(t, "", "--config", s.cfg, "prompts", "publish", writePrompt(t, dbPrompt)); pub.code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", pub.code, pub.stdout, pub.stderr)
	}
	// The host's own check of the database runs on its own clock: until
	// it sees the database back, runs are refused, retryable.
	deadline := time.Now().Add(30 * time.Second)
	out := dbAnswer(t, d, "promptLibrary", "get", map[string]string{"promptId": "db/greeting@1"})
	for ; out.Status != "succeeded"; out = dbAnswer(t, d, "promptLibrary", "get", map[string]string{"promptId": "db/greeting@1"}) {
		if !out.Error.Retryable || time.Now().After(deadline) {
			t.Fatalf("get once the database is up: %+v", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkGot(t, "get once the database is up", out)
	if out := call(t, d, "test.echo", "echo", map[string]int{"n": 1}); out.Status != "succeeded" {
		t.Fatalf("echo once the database is up: %+v", out)
	}
	if code := d.stop(t, 15); code != 0 {
		t.Errorf("host serve exited %d", code)
	}
}

// The database lost while the host serves: calls that need it fail with
// the retryable unavailable, the capability stays ready in the same
// process, and calls succeed again once the database is back, nothing
// published lost. A pinned version the plugin had already read is still
// served, from its cache of verified versions.
func TestDatabaseLostMidFlight(t *testing.T) {
	s := newDBSetup(t)
	for _, raw := range []string{dbPrompt, dbUnreadPrompt} {
		if pub := runHost(t, "", "--config", s.cfg, "prompts", "publish", writePrompt(t, raw)); pub.code != 0 {
			t.Fatalf("publish: exit %d\n%s%s", pub.code, pub.stdout, pub.stderr)
		}
	}
	d := startServe(t, s.cfg)
	waitForServedState(t, d, "prompts", "ready", 10*time.Second)
	checkGot(t, "get with the database up", getPrompt(t, d, "db/greeting@1"))

	s.server.Stop()
	// Refused by the host, or failed in the plugin if the run started
	// before the host saw the database go: retryable either way. The
	// version never read must come from the database.
	get := func() runOutcome {
		return dbAnswer(t, d, "promptLibrary", "get", map[string]string{"promptId": "db/unread@1"})
	}
	out := get()
	if out.Status != "failed" || !out.Error.Retryable || (out.Error.Code != "unavailable" && out.Error.Code != storageUnavailable) {
		t.Fatalf("get with the database down: %+v, want a retryable unavailable", out)
	}
	// The version read before: the plugin answers it from its cache, or
	// the host refuses the run, as it refuses every run while its own
	// records cannot be written.
	if cached := dbAnswer(t, d, "promptLibrary", "get", map[string]string{"promptId": "db/greeting@1"}); cached.Status != "succeeded" {
		if !cached.Error.Retryable || cached.Error.Code != storageUnavailable {
			t.Fatalf("get of a version read before, database down: %+v", cached)
		}
	} else {
		checkGot(t, "get of a version read before, database down", cached)
	}
	if rec := servedRecords(t, d)["prompts"]; rec.State != "ready" {
		t.Fatalf("prompts while the database is down: %+v, want ready (a call fails, the plugin does not)", rec)
	}

	s.server.Start()
	deadline := time.Now().Add(30 * time.Second)
	for out = get(); out.Status != "succeeded"; out = get() {
		if !out.Error.Retryable || time.Now().After(deadline) {
			t.Fatalf("get once the database is back: %+v", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := out; got.Status != "succeeded" || !strings.Contains(string(got.Output), "db/unread") {
		t.Fatalf("get once the database is back: %+v %s", out, out.Output)
	}
	checkGot(t, "get once the database is back", getPrompt(t, d, "db/greeting@1"))
	// servedRecords checks that no capability was restarted.
	if rec := servedRecords(t, d)["prompts"]; rec.State != "ready" {
		t.Fatalf("prompts once the database is back: %+v", rec)
	}
	if code := d.stop(t, 15); code != 0 {
		t.Errorf("host serve exited %d", code)
	}
}
