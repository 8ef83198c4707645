package integration

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// kvdemoPack lays out the kvdemo pack in a fresh directory.
func kvdemoPack(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kvdemo")
	if err := testbin.LayOutPack("examples/packs/kvdemo", binary(t, "./examples/packs/kvdemo"), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kvServeConfig is a deployment of the kv plugin and the kvdemo pack
// behind `host serve` on a free port; hostExtra goes into the host block.
func kvServeConfig(t *testing.T, stateDir, hostExtra string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  state_dir  = %q
%s
  http {
    listen = "127.0.0.1:0"
  }
}
capability "kv" {
  plugin = "wophost-kv"
}
pack "community.wophost.kvdemo" { path = %q }
`, stateDir, hostExtra, kvdemoPack(t)))
}

// newKey returns a fresh idempotency key with 128 random bits.
func newKey(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + "-" + hex.EncodeToString(b[:])
}

// executeReply is the decoded answer of POST :execute: a run outcome (200)
// or a refusal in OpenWOP's envelope. Code, Message, Retryable and Details
// are the failed run's ctx-level error, or the refusal's.
type executeReply struct {
	status   int
	replayed bool // the OpenWOP-Idempotent-Replay header
	body     string
	// Outcome is the run outcome's status: succeeded or failed; empty for
	// a refusal.
	Outcome string
	Output  struct {
		Version int `json:"version"`
	}
	RunID     string
	Code      string
	Message   string
	Retryable bool
	Details   struct {
		Storage string `json:"storage"`
	}
}

// tryRemember runs kvdemo.remember, under idemKey when it is not empty.
// It may be called from any goroutine.
func tryRemember(base, kvKey, value, idemKey string) (executeReply, error) {
	header := map[string]string{}
	if idemKey != "" {
		header["Idempotency-Key"] = idemKey
	}
	return tryExecute(base, "kvdemo.remember", fmt.Sprintf(`{"input":{"key":%q,"value":%q}}`, kvKey, value), header)
}

func tryExecute(base, typeID, body string, header map[string]string) (executeReply, error) {
	req, err := http.NewRequest("POST", base+"/v1/nodes/"+typeID+":execute", strings.NewReader(body))
	if err != nil {
		return executeReply{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return executeReply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return executeReply{}, err
	}
	out, err := decodeExecuteReply(resp.StatusCode, data)
	if err != nil {
		return executeReply{}, fmt.Errorf("execute %s: %d: %w", typeID, resp.StatusCode, err)
	}
	out.replayed = resp.Header.Get("OpenWOP-Idempotent-Replay") == "true"
	return out, nil
}

func remember(t *testing.T, base, kvKey, value, idemKey string) executeReply {
	t.Helper()
	r, err := tryRemember(base, kvKey, value, idemKey)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func executeNode(t *testing.T, base, typeID, body string, header map[string]string) executeReply {
	t.Helper()
	r, err := tryExecute(base, typeID, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recallVersion reads the version the kv store holds under kvKey (0 when
// none): how many times kvdemo.remember wrote it.
func recallVersion(t *testing.T, base, kvKey string) int {
	t.Helper()
	r := executeNode(t, base, "kvdemo.recall", fmt.Sprintf(`{"input":{"key":%q}}`, kvKey), nil)
	switch {
	case r.ok():
		return r.Output.Version
	case r.Outcome == "failed" && r.Code == "acme.key_not_found":
		return 0
	}
	t.Fatalf("recall %s: %d %s %s", kvKey, r.status, r.Code, r.Message)
	return -1
}

// TestServeIdempotencyKey drives the idempotency rules through the real
// host serve, kv plugin and kvdemo pack: kvdemo.remember increments the
// stored version on every run, so a second run would show version 2.
func TestServeIdempotencyKey(t *testing.T) {
	d := startServe(t, kvServeConfig(t, t.TempDir(), ""))

	key := newKey("idem")
	first := remember(t, d.base, "idem-a", "one", key)
	if !first.ok() || first.Output.Version != 1 || first.replayed {
		t.Fatalf("first request: %+v", first)
	}
	again := remember(t, d.base, "idem-a", "one", key)
	if !again.ok() || !again.replayed || again.body != first.body || again.RunID != first.RunID || again.Output.Version != 1 {
		t.Fatalf("repeat: %+v; want the recorded outcome of %s, marked replayed", again, first.RunID)
	}
	// The same key in the body is the same key.
	body := executeNode(t, d.base, "kvdemo.remember", fmt.Sprintf(`{"input":{"value":"one","key":"idem-a"},"idempotencyKey":%q}`, key), nil)
	if !body.ok() || !body.replayed || body.RunID != first.RunID {
		t.Fatalf("repeat with the key in the body: %+v", body)
	}
	if v := recallVersion(t, d.base, "idem-a"); v != 1 {
		t.Fatalf("after three requests under one key the store holds version %d, want 1", v)
	}

	mismatch := remember(t, d.base, "idem-a", "two", key)
	if mismatch.status != 409 || mismatch.Code != "idempotency_key_mismatch" || mismatch.replayed {
		t.Fatalf("another input under the key: %+v", mismatch)
	}
	if bad := remember(t, d.base, "idem-a", "two", "too-short"); bad.status != 400 || bad.Code != "idempotency_key_invalid" {
		t.Fatalf("a key outside the grammar: %+v", bad)
	}
	conflict := executeNode(t, d.base, "kvdemo.remember", fmt.Sprintf(`{"input":{"key":"idem-a","value":"one"},"idempotencyKey":%q}`, newKey("other")),
		map[string]string{"Idempotency-Key": key})
	if conflict.status != 400 || conflict.Code != "idempotency_key_invalid" {
		t.Fatalf("header and body keys differ: %+v", conflict)
	}
	if v := recallVersion(t, d.base, "idem-a"); v != 1 {
		t.Fatalf("refused requests wrote: version %d, want 1", v)
	}

	// Concurrent requests under one key: exactly one runs.
	const n = 16
	ckey := newKey("concurrent")
	replies := make([]executeReply, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := tryRemember(d.base, "idem-b", "same", ckey)
			if err != nil {
				t.Error(err)
			}
			replies[i] = r
		}()
	}
	close(start)
	wg.Wait()
	ran, replayed, inFlight := 0, 0, 0
	for _, r := range replies {
		switch {
		case r.ok() && !r.replayed:
			ran++
		case r.ok() && r.replayed && r.Output.Version == 1:
			replayed++
		case r.status == 409 && r.Code == "idempotency_in_flight" && r.Retryable:
			inFlight++
		default:
			t.Errorf("concurrent request: %+v", r)
		}
	}
	if ran != 1 {
		t.Fatalf("%d of %d concurrent requests ran the node (%d replayed, %d in flight), want exactly 1", ran, n, replayed, inFlight)
	}
	if v := recallVersion(t, d.base, "idem-b"); v != 1 {
		t.Fatalf("after %d concurrent requests the store holds version %d, want 1", n, v)
	}
	t.Logf("%d concurrent requests under one key: 1 ran, %d replayed, %d told it was in flight", n, replayed, inFlight)

	metrics := request(t, "GET", d.base+"/metrics", "", nil)
	if !regexp.MustCompile(`wophost_idempotent_replays_total\{type_id="kvdemo.remember"\} [1-9]`).MatchString(metrics.body) {
		t.Errorf("replays not counted:\n%s", grepLines(metrics.body, "wophost_idempotent"))
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
}

// TestRunIdempotencyKey: `host run --idempotency-key` answers a repeat
// from the record, across processes.
func TestRunIdempotencyKey(t *testing.T) {
	stateDir := t.TempDir()
	cfg := kvServeConfig(t, stateDir, "")
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte(`{"key":"cli","value":"v"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	key := newKey("cli")
	first := runHost(t, "", "--config", cfg, "run", "kvdemo.remember", "--input", in, "--idempotency-key", key)
	if first.code != 0 || !strings.Contains(first.stdout, `"version": 1`) || strings.Contains(first.stderr, "idempotent replay") {
		t.Fatalf("first run: %d\n%s%s", first.code, first.stdout, first.stderr)
	}
	// The run's record keeps its key.
	records, _ := filepath.Glob(filepath.Join(stateDir, "runs", "run_*.json"))
	if len(records) != 1 {
		t.Fatalf("records after the first run: %v", records)
	}
	if data, err := os.ReadFile(records[0]); err != nil || !strings.Contains(string(data), `"idempotencyKey": "`+key+`"`) {
		t.Fatalf("the run's record does not keep its key (%v):\n%s", err, data)
	}
	again := runHost(t, "", "--config", cfg, "run", "kvdemo.remember", "--input", in, "--idempotency-key", key)
	if again.code != 0 || !strings.Contains(again.stdout, `"version": 1`) || !strings.Contains(again.stderr, "idempotent replay") {
		t.Fatalf("repeat: %d\n%s%s", again.code, again.stdout, again.stderr)
	}
	other := runHost(t, `{"key":"cli","value":"w"}`, "--config", cfg, "run", "kvdemo.remember", "--input", "-", "--idempotency-key", key)
	if other.code != 1 || !strings.Contains(other.stdout, "idempotency_key_mismatch") {
		t.Fatalf("another input: %d\n%s%s", other.code, other.stdout, other.stderr)
	}
	bad := runHost(t, "", "--config", cfg, "run", "kvdemo.remember", "--input", in, "--idempotency-key", "short")
	if bad.code != 1 || !strings.Contains(bad.stdout, "idempotency_key_invalid") {
		t.Fatalf("bad key: %d\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
	// A repeat without the key runs: version 2.
	plain := runHost(t, "", "--config", cfg, "run", "kvdemo.remember", "--input", in)
	if plain.code != 0 || !strings.Contains(plain.stdout, `"version": 2`) {
		t.Fatalf("run without a key: %d\n%s%s", plain.code, plain.stdout, plain.stderr)
	}
}

// TestRetentionPrunesRunRecords: a host keeps at most max_run_records,
// pruning at start and every interval, oldest first.
func TestRetentionPrunesRunRecords(t *testing.T) {
	stateDir := t.TempDir()
	runs := filepath.Join(stateDir, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	// Ten records of an earlier life, a month old.
	old := time.Now().Add(-30 * 24 * time.Hour)
	for i := range 10 {
		p := filepath.Join(runs, fmt.Sprintf("run_old%021d.json", i))
		if err := os.WriteFile(p, []byte(`{}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	d := startServe(t, kvServeConfig(t, stateDir, `
  retention {
    run_records     = "168h"
    max_run_records = 5
    interval        = "1s"
  }`))
	waitFor(t, "the month-old records pruned at start", func() bool { return countRecords(t, runs, "run_old") == 0 })
	for i := range 12 {
		if r := remember(t, d.base, fmt.Sprintf("ret-%d", i), "v", ""); !r.ok() {
			t.Fatalf("run %d: %+v", i, r)
		}
	}
	waitFor(t, "the records cut to max_run_records", func() bool { return countRecords(t, runs, "run_") == 5 })
	// The count is reported once a pruning has finished.
	waitFor(t, "17 pruned records counted", func() bool {
		return strings.Contains(request(t, "GET", d.base+"/metrics", "", nil).body, `wophost_pruned_records_total{store="run_records"} 17`)
	})
	// Each pruned record left a tombstone, and the tombstones are bounded
	// by max_run_records as the records are.
	if n := countTombstones(t, filepath.Join(runs, "expired")); n != 5 {
		t.Fatalf("%d tombstones of pruned runs; want max_run_records, 5", n)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
}

// countTombstones counts the tombstones of pruned runs in dir.
func countTombstones(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "run_") && e.Type().IsRegular() {
			n++
		}
	}
	return n
}

func countRecords(t *testing.T, dir, prefix string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	return n
}

// countPending counts the claims still pending in an idempotency store
// directory.
func countPending(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if rec.State != "done" {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grepLines returns the lines of text that contain substr.
func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// metricValue reads one sample of the Prometheus text.
func metricValue(text, series string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return -1
}

// smallDisk is a tmpfs of a few MiB holding the host's state_dir.
type smallDisk struct {
	// dir is the state_dir as the host sees it.
	dir string
	// access returns the path the test reaches dir by (the host may see
	// it in a mount namespace of its own).
	access func() string
}

// mountSmallDisk prepares a tmpfs of size for a host's state_dir, with
// state_dir/plugins/kv a link to kvDir on the ordinary disk, so the kv
// plugin's writes (the node's effects) succeed while the host's own
// records fail. As root it mounts the tmpfs here; otherwise the host runs
// in a user and mount namespace of its own (unshare -Urm) that mounts it.
// The returned command starts `host serve` with cfg. The test is skipped
// when neither works.
func mountSmallDisk(t *testing.T, size, kvDir, cfgPath string) (*smallDisk, *exec.Cmd) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(root string) error {
		if err := os.MkdirAll(filepath.Join(root, "plugins"), 0o755); err != nil {
			return err
		}
		return os.Symlink(kvDir, filepath.Join(root, "plugins", "kv"))
	}
	if os.Geteuid() == 0 && os.Getenv("WOPHOST_TEST_TMPFS") != "unshare" {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err == nil {
			t.Cleanup(func() {
				if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v %s", dir, err, out)
				}
			})
			if err := link(dir); err != nil {
				t.Fatal(err)
			}
			return &smallDisk{dir: dir, access: func() string { return dir }}, exec.Command(bin.host, "--config", cfgPath, "serve")
		} else {
			t.Logf("mount as root failed (%v: %s); trying unshare", err, strings.TrimSpace(string(out)))
		}
	}
	if out, err := exec.Command("unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$1\"", "sh", dir).CombinedOutput(); err != nil {
		t.Skipf("needs a small file system: mounting a tmpfs needs root, or unshare -Urm (user and mount namespaces), and both failed here: %v %s",
			err, strings.TrimSpace(string(out)))
	}
	script := `mount -t tmpfs -o size="$1" tmpfs "$2" && mkdir -p "$2/plugins" && ln -s "$3" "$2/plugins/kv" && shift 3 && exec "$@"`
	cmd := exec.Command("unshare", "-Urm", "sh", "-c", script, "sh", size, dir, kvDir, bin.host, "--config", cfgPath, "serve")
	disk := &smallDisk{dir: dir}
	// unshare and sh exec the host, so the host's pid is the command's.
	disk.access = func() string { return fmt.Sprintf("/proc/%d/root%s", cmd.Process.Pid, dir) }
	return disk, cmd
}

// fill writes a file into the disk until it is full, and returns the
// file's path.
func (d *smallDisk) fill(t *testing.T) string {
	t.Helper()
	path := filepath.Join(d.access(), "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create the filler: %v", err)
	}
	defer f.Close()
	for _, chunk := range []int{256 << 10, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill: %v", err)
				}
				break
			}
		}
	}
	return path
}

// op is one logical request of the full-disk test: one kv key written
// once, retried until it is answered 200.
type op struct {
	kvKey, idemKey string
	attempts       []executeReply
}

// TestServeFullDisk runs host serve with its state_dir on a small tmpfs
// under a steady load of kvdemo.remember from several clients, fills the
// disk, then frees it. No false failures and no double writes: every 200
// carries version 1 and the store holds version 1 for every key (a run
// repeated after an answer that hid its effect would show 2), every
// answer that is not 2xx is retryable, /readyz is 503 while the disk is
// full and 200 once it is freed, and runs are accepted again. Half the
// clients send an Idempotency-Key, half do not: neither may write twice.
// `go test -v -run TestServeFullDisk ./test/integration/` prints the
// figures.
func TestServeFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("full-disk test skipped in -short mode")
	}
	f := startFullDiskServe(t)
	f.startLoad(t)
	if !t.Run("the load is answered", f.loadAnswered) {
		t.FailNow()
	}
	if !t.Run("a full disk turns readyz 503 and runs are refused", f.fillDisk) {
		t.FailNow()
	}
	if !t.Run("freed space turns readyz 200 and runs are answered again", f.freeDisk) {
		t.FailNow()
	}
	f.stopLoad()

	t.Run("every op is written once and every failure is retryable", f.opsWrittenOnce)
	t.Run("every keyed op is answered again from its record", f.keyedOpsReplayed)
	t.Run("no idempotency claim is left pending", f.noClaimPending)
	f.logFigures(t)
	t.Run("runs without a key are refused on the full disk", f.keylessRefused)
	t.Run("no more run records are lost than runs were in flight", f.fewRecordsLost)
	t.Run("readyz says why it is not ready", f.readyzReason)
	t.Run("serve exits 0 on SIGTERM", func(t *testing.T) {
		if code := f.d.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit %d:\n%s", code, f.d.log())
		}
	})
}

// fullDiskClients is how many clients load the full-disk test's host.
const fullDiskClients = 6

// fullDiskServe is host serve on a small disk under load, and what the
// full-disk test measured.
type fullDiskServe struct {
	disk *smallDisk
	d    *daemon

	// stop ends the load after the op in hand; abort, at a failed test's
	// end, ends it at once.
	stop, abort chan struct{}
	stopOnce    sync.Once
	wg          sync.WaitGroup
	// mu guards ops and the counts below it.
	mu  sync.Mutex
	ops []*op
	// What the clients have seen so far, for the test to wait on: requests
	// answered 200, and runs refused before they started for want of
	// space, with and without an Idempotency-Key.
	answered, refusedKeyed, refusedKeyless int

	notReady              reply         // /readyz while the disk was full
	sawFull, recovered    time.Duration // from filling and freeing the disk to /readyz seeing it
	tally                 fullDiskTally
	rereplayed, pending   int
	recordsLost, keysLost float64
}

// fullDiskTally counts the attempts of every op.
type fullDiskTally struct {
	requests, ok, replays, doubles, refusedBeforeRun, refusedKeyless, unfinished int
	failures                                                                     map[string]int // "status code" → count
}

// startFullDiskServe starts host serve with its state_dir on a 16 MiB
// tmpfs and checks it is ready.
func startFullDiskServe(t *testing.T) *fullDiskServe {
	t.Helper()
	kvDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "host.hcl")
	disk, cmd := mountSmallDisk(t, "16m", kvDir, cfgPath)
	cfg, err := os.ReadFile(kvServeConfig(t, disk.dir, `
  max_message_bytes = 65536
  retention {
    max_run_records = 300
    interval        = "1s"
  }`))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fullDiskServe{disk: disk, d: startServeCommand(t, cmd), stop: make(chan struct{}), abort: make(chan struct{})}
	if r := f.readyz(t); r.status != 200 {
		t.Fatalf("readyz before the test: %d %s", r.status, r.body)
	}
	return f
}

func (f *fullDiskServe) readyz(t *testing.T) reply {
	return request(t, "GET", f.d.base+"/readyz", "", nil)
}

func (f *fullDiskServe) seen() (ok, keyed, keyless int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answered, f.refusedKeyed, f.refusedKeyless
}

// startLoad starts the clients; at t's end they are aborted.
func (f *fullDiskServe) startLoad(t *testing.T) {
	t.Cleanup(func() {
		f.stopOnce.Do(func() { close(f.stop) })
		close(f.abort)
		f.wg.Wait()
	})
	for w := range fullDiskClients {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.client(t, w)
		}()
	}
}

// stopLoad ends the load once each client's op in hand is done.
func (f *fullDiskServe) stopLoad() {
	f.stopOnce.Do(func() { close(f.stop) })
	f.wg.Wait()
}

// client w remembers one key after another until stop; clients of even
// w send an Idempotency-Key.
func (f *fullDiskServe) client(t *testing.T, w int) {
	for i := 0; ; i++ {
		select {
		case <-f.stop:
			return
		default:
		}
		o := &op{kvKey: fmt.Sprintf("w%d-op%d", w, i)}
		if w%2 == 0 {
			o.idemKey = newKey(fmt.Sprintf("w%d-op%d", w, i))
		}
		if !f.complete(t, o) {
			return
		}
		f.mu.Lock()
		f.ops = append(f.ops, o)
		f.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // the load's pace: an op per client every 10ms at most
	}
}

// complete retries o until it is answered 200, also after stop: an op is
// never left half done. It reports false if the load was aborted.
func (f *fullDiskServe) complete(t *testing.T, o *op) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-f.abort:
			return false
		default:
		}
		r, err := tryRemember(f.d.base, o.kvKey, "value", o.idemKey)
		if err != nil {
			// A request the host never answered: counted as a
			// retryable failure, and the op is retried.
			t.Errorf("%s: %v", o.kvKey, err)
			r = executeReply{Code: "transport", Retryable: true}
		}
		o.attempts = append(o.attempts, r)
		f.mu.Lock()
		switch {
		case r.ok():
			f.answered++
		case r.Details.Storage != "" && o.idemKey != "":
			f.refusedKeyed++
		case r.Details.Storage != "":
			f.refusedKeyless++
		}
		f.mu.Unlock()
		if r.ok() || !r.Retryable {
			break
		}
		time.Sleep(25 * time.Millisecond) // a client's back-off before it retries
	}
	return true
}

// loadAnswered waits until every client has been answered a few times.
func (f *fullDiskServe) loadAnswered(t *testing.T) {
	waitFor(t, "the load to be answered", func() bool { ok, _, _ := f.seen(); return ok >= 4*fullDiskClients })
}

// fillDisk fills the disk, and leaves it full until clients with and
// without a key have had runs refused for want of space; then frees it.
func (f *fullDiskServe) fillDisk(t *testing.T) {
	filledAt := time.Now()
	filler := f.disk.fill(t)
	waitFor(t, "/readyz to report the full disk", func() bool { f.notReady = f.readyz(t); return f.notReady.status == 503 })
	f.sawFull = time.Since(filledAt)
	_, keyedBefore, keylessBefore := f.seen()
	waitFor(t, "runs with and without a key to be refused on the full disk", func() bool {
		_, keyed, keyless := f.seen()
		return keyed > keyedBefore && keyless > keylessBefore
	})
	if r := f.readyz(t); r.status != 503 {
		t.Errorf("readyz while the disk is still full: %d %s", r.status, r.body)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
}

func (f *fullDiskServe) freeDisk(t *testing.T) {
	freedAt := time.Now()
	waitFor(t, "/readyz to recover once space returned", func() bool { return f.readyz(t).status == 200 })
	f.recovered = time.Since(freedAt)
	okFreed, _, _ := f.seen()
	waitFor(t, "runs to be answered after the disk was freed", func() bool { ok, _, _ := f.seen(); return ok >= okFreed+4*fullDiskClients })
}

// opsWrittenOnce checks every attempt of every op, and what the store
// holds for it: every 200 carries version 1, every failure is
// retryable, every op ends answered, and the store holds version 1.
func (f *fullDiskServe) opsWrittenOnce(t *testing.T) {
	n := &f.tally
	n.failures = map[string]int{}
	for _, o := range f.ops {
		for _, r := range o.attempts {
			n.requests++
			switch {
			case r.ok():
				n.ok++
				if r.replayed {
					n.replays++
				}
				if r.Output.Version != 1 {
					n.doubles++
					t.Errorf("%s answered version %d: written more than once", o.kvKey, r.Output.Version)
				}
			default:
				n.failures[fmt.Sprintf("%d %s", r.status, r.Code)]++
				if !r.Retryable {
					t.Errorf("%s: a failure that is not retryable: %+v", o.kvKey, r)
				}
				if r.Code == "wophost.storage_unavailable" && r.Details.Storage != "" && strings.Contains(r.Message, "refused before it started") {
					n.refusedBeforeRun++
					if o.idemKey == "" {
						n.refusedKeyless++
					}
				}
			}
		}
		if last := o.attempts[len(o.attempts)-1]; !last.ok() {
			n.unfinished++
			t.Errorf("%s never succeeded: %+v", o.kvKey, last)
			continue
		}
		if v := recallVersion(t, f.d.base, o.kvKey); v != 1 {
			n.doubles++
			t.Errorf("%s: the store holds version %d, want 1", o.kvKey, v)
		}
	}
}

// keyedOpsReplayed repeats every keyed op: it is answered from its key,
// never run again.
func (f *fullDiskServe) keyedOpsReplayed(t *testing.T) {
	for _, o := range f.ops {
		if o.idemKey == "" {
			continue
		}
		r := remember(t, f.d.base, o.kvKey, "value", o.idemKey)
		if !r.ok() || !r.replayed || r.Output.Version != 1 {
			t.Errorf("%s repeated under its key: %+v; want its recorded outcome", o.kvKey, r)
			continue
		}
		f.rereplayed++
	}
}

// noClaimPending waits for every idempotency outcome to be written:
// outcomes that could not be written while the disk was full were
// answered from memory, then written.
func (f *fullDiskServe) noClaimPending(t *testing.T) {
	f.pending = -1
	waitFor(t, "every idempotency outcome written", func() bool {
		f.pending = countPending(t, filepath.Join(f.disk.access(), "idempotency"))
		return f.pending == 0
	})
}

func (f *fullDiskServe) logFigures(t *testing.T) {
	metrics := request(t, "GET", f.d.base+"/metrics", "", nil).body
	f.recordsLost = metricValue(metrics, `wophost_state_write_failures_total{store="run_records"}`)
	f.keysLost = metricValue(metrics, `wophost_state_write_failures_total{store="idempotency_keys"}`)
	n := f.tally
	codes := make([]string, 0, len(n.failures))
	for c, k := range n.failures {
		codes = append(codes, fmt.Sprintf("%s ×%d", c, k))
	}
	slices.Sort(codes)
	keyed := 0
	for _, o := range f.ops {
		if o.idemKey != "" {
			keyed++
		}
	}
	t.Logf("%d ops (%d with an Idempotency-Key) by %d clients: %d requests, %d answered 200 (%d replayed), failures by code: [%s]",
		len(f.ops), keyed, fullDiskClients, n.requests, n.ok, n.replays, strings.Join(codes, ", "))
	t.Logf("refused before running: %d; double writes: %d; unfinished ops: %d; writes lost to the full disk: %v run records, %v idempotency records",
		n.refusedBeforeRun, n.doubles, n.unfinished, f.recordsLost, f.keysLost)
	t.Logf("every keyed op repeated under its key afterwards: %d answered from its record, %d claims left pending", f.rereplayed, f.pending)
	t.Logf("/readyz turned 503 %v after the disk filled (%q) and 200 %v after it was freed",
		f.sawFull.Round(time.Millisecond), f.notReady.body, f.recovered.Round(time.Millisecond))
}

func (f *fullDiskServe) keylessRefused(t *testing.T) {
	if f.tally.refusedKeyless == 0 {
		t.Error("no run without a key was refused while the disk was full")
	}
}

// fewRecordsLost: runs are refused before they act, so only the runs
// already under way when the disk filled (at most one per client, and
// those that passed the cached check just before) can act without a
// record.
func (f *fullDiskServe) fewRecordsLost(t *testing.T) {
	if f.recordsLost > 2*fullDiskClients {
		t.Errorf("%v run records lost: more runs acted on a full disk than were in flight when it filled", f.recordsLost)
	}
}

func (f *fullDiskServe) readyzReason(t *testing.T) {
	if !strings.Contains(f.notReady.body, "state directory cannot take writes") {
		t.Errorf("readyz reason: %s", f.notReady.body)
	}
}
