package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/test/testbin"
)

// The containment tests run the hostile pack (test/packs/hostile): one
// node, hostile.try, that tries one thing a pack should not do per run.
// Contained, each try fails with sandbox_capability_denied naming the
// runtime requirement that would have allowed it, while the pack can
// still use its own temp directory and the host goes on serving.

// apiToken is the bearer token of the hosts these tests start, in their
// environment as WOPHOST_API_TOKEN: what the environ reach looks for.
const apiToken = "sandbox-api-token-canary-9d41"

// Codes of the containment errors (OpenWOP RFC 0035 and 0076).
const (
	codeCapabilityDenied = "sandbox_capability_denied"
	codeMemoryExceeded   = "sandbox_memory_exceeded"
	codeRequirementUnmet = "pack_runtime_requirement_unmet"
)

const (
	hostileName = "private.wophost.hostile"
	grantedName = "private.wophost.hostile-granted"
	kvdemoName  = "community.wophost.kvdemo"
)

// requireContainment skips the test where the host cannot contain a
// pack: off Linux, or on a kernel without Landlock. Nothing else skips
// it, so that wherever containment is possible a failure to contain is a
// failure of the test.
func requireContainment(t *testing.T) {
	t.Helper()
	// WOPHOST_TEST_SANDBOX=1 (as CI sets it) makes a machine that cannot
	// contain a pack fail these tests rather than skip them.
	skip := t.Skipf
	if os.Getenv("WOPHOST_TEST_SANDBOX") == "1" {
		skip = t.Fatalf
	}
	if runtime.GOOS != "linux" {
		skip("containing packs takes Linux (Landlock, seccomp, cgroups); this is %s", runtime.GOOS)
	}
	if _, err := landlockABI(); err != nil {
		skip("Landlock is unavailable on this kernel (%v), so the host cannot contain a pack here", err)
	}
}

// hostilePack lays out the hostile pack of test/packs/DIR in a fresh
// directory and returns it.
func hostilePack(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), dir)
	if err := testbin.LayOutPack("test/packs/"+dir, binary(t, "./test/packs/"+dir), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sandboxSetup is a host serving the kv plugin, the kvdemo pack and a
// hostile pack, behind a bearer token.
type sandboxSetup struct {
	cfg, state string
	d          *daemon
}

// sandboxConfig writes the config of a sandboxSetup: hostExtra goes into
// the host block, packs holds the pack blocks beyond kvdemo's.
func sandboxConfig(t *testing.T, state, hostExtra, packs string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  state_dir  = %q
%s
  http {
    listen = "127.0.0.1:0"
    tokens = [env("WOPHOST_API_TOKEN")]
  }
}
capability "kv" {
  plugin = "wophost-kv"
}
pack %q { path = %q }
%s`, state, hostExtra, kvdemoName, kvdemoPack(t), packs))
}

// startSandboxHost starts `host serve` on the config sandboxConfig writes,
// with the API token in its environment.
func startSandboxHost(t *testing.T, hostExtra, packs string) *sandboxSetup {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state")
	cfg := sandboxConfig(t, state, hostExtra, packs)
	return &sandboxSetup{cfg: cfg, state: state, d: startServe(t, cfg, "WOPHOST_API_TOKEN="+apiToken)}
}

// auth is the header every request of these tests carries.
var auth = map[string]string{"Authorization": "Bearer " + apiToken}

// tryOutcome is the run outcome of one try of a hostile node.
type tryOutcome struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
	Output *struct {
		Done   bool   `json:"done"`
		Detail string `json:"detail"`
		Count  int    `json:"count"`
	} `json:"output"`
	Error *struct {
		Code      string         `json:"code"`
		Message   string         `json:"message"`
		Retryable bool           `json:"retryable"`
		Details   map[string]any `json:"details"`
	} `json:"error"`
	body string
}

// try runs typeID with the reach and target given, under the run timeout
// timeoutMs (none when 0), and returns the run's outcome.
func (s *sandboxSetup) try(t *testing.T, typeID, reach, target string, timeoutMs int) tryOutcome {
	t.Helper()
	req := map[string]any{"input": map[string]string{"reach": reach, "target": target}}
	if timeoutMs > 0 {
		req["timeoutMs"] = timeoutMs
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	r := request(t, "POST", s.d.base+"/v1/nodes/"+typeID+":execute", string(body), auth)
	out := tryOutcome{body: r.body}
	if r.status != 200 {
		t.Fatalf("%s %s %q: %d %s, want a run outcome\n%s", typeID, reach, target, r.status, r.body, s.d.log())
	}
	if err := json.Unmarshal([]byte(r.body), &out); err != nil || out.RunID == "" {
		t.Fatalf("%s %s %q: not a run outcome (%v): %s", typeID, reach, target, err, r.body)
	}
	return out
}

// succeeded fails t unless the try worked, and returns its detail.
func (o tryOutcome) succeeded(t *testing.T, what string) string {
	t.Helper()
	if o.Status != "succeeded" || o.Output == nil || !o.Output.Done {
		t.Fatalf("%s: %s, want it done", what, o.body)
	}
	return o.Output.Detail
}

// denied fails t unless the try failed with sandbox_capability_denied
// naming capability as the requested one.
func (o tryOutcome) denied(t *testing.T, what, capability string) {
	t.Helper()
	if o.Status != "failed" || o.Error == nil || o.Error.Code != codeCapabilityDenied {
		t.Fatalf("%s: %s, want it failed with %s", what, o.body, codeCapabilityDenied)
	}
	if got := o.Error.Details["requestedCapability"]; got != capability {
		t.Errorf("%s: details.requestedCapability = %v, want %q (%s)", what, got, capability, o.body)
	}
}

// listener is a TCP listener on loopback that counts the connections it
// accepts.
type listener struct {
	ln       net.Listener
	accepted chan string
}

func listen(t *testing.T) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{ln: ln, accepted: make(chan string, 64)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	return l
}

func (l *listener) addr() string { return l.ln.Addr().String() }

// acceptedSoFar returns how many connections reached the listener before
// now: it connects itself and counts what the listener accepted before
// that connection, so that a connection already made but not yet
// accepted is counted too.
func (l *listener) acceptedSoFar(t *testing.T) int {
	t.Helper()
	c, err := net.Dial("tcp", l.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mine := c.LocalAddr().String()
	n := 0
	timeout := time.After(30 * time.Second)
	for {
		select {
		case from := <-l.accepted:
			if from == mine {
				return n
			}
			n++
		case <-timeout:
			t.Fatalf("the listener never accepted the test's own connection (%d others)", n)
		}
	}
}

// packInfo returns the host's record of the pack name from GET /v1/packs.
func (s *sandboxSetup) packInfo(t *testing.T, name string) host.PackInfo {
	t.Helper()
	r := request(t, "GET", s.d.base+"/v1/packs", "", auth)
	var packs []host.PackInfo
	if err := json.Unmarshal([]byte(r.body), &packs); r.status != 200 || err != nil {
		t.Fatalf("GET /v1/packs: %d %s (%v)", r.status, r.body, err)
	}
	for _, p := range packs {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("GET /v1/packs does not list %s: %s", name, r.body)
	return host.PackInfo{}
}

// kvdemoAnswers fails t unless the kvdemo pack runs a node: the host
// still serves a pack beside the hostile one.
func (s *sandboxSetup) kvdemoAnswers(t *testing.T, value string) {
	t.Helper()
	r := executeNode(t, s.d.base, "kvdemo.remember", fmt.Sprintf(`{"input":{"key":"sandbox","value":%q}}`, value), auth)
	if !r.ok() || r.Output.Version < 1 {
		t.Fatalf("kvdemo.remember: %d %s\n%s", r.status, r.body, s.d.log())
	}
}

// anotherPacksState writes a file where another pack's state lives and
// returns its path.
func anotherPacksState(t *testing.T, state string) string {
	t.Helper()
	dir := filepath.Join(state, "packs", kvdemoName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "remembered.json")
	if err := os.WriteFile(path, []byte(`{"secret":"kvdemo-state-canary"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Under the default policy the hostile pack is refused each reach beyond
// its own directories, with the capability that would have allowed it,
// and nothing of the reach happens; its own temp directory still works,
// and afterwards the host still serves the kvdemo pack and the hostile
// pack itself.
func TestContainedPackRefusesEachReach(t *testing.T) {
	requireContainment(t)
	s := startSandboxHost(t, "  require_sandbox = true", fmt.Sprintf("pack %q { path = %q }\n", hostileName, hostilePack(t, "hostile")))
	ln := listen(t)
	sibling := anotherPacksState(t, s.state)
	outside := filepath.Join(t.TempDir(), "written-by-hostile")

	s.try(t, "hostile.try", "own", "", 0).succeeded(t, "own before")
	// refused counts the tries the sandbox refused, each of which the
	// host counts as a violation of the capability rule.
	refused := 0
	for _, c := range []struct {
		name, reach, target, capability string
		after                           func(t *testing.T, o tryOutcome)
	}{
		{name: "the host's environment", reach: "environ", capability: "fs.read"},
		{name: "the host's config", reach: "read", target: s.cfg, capability: "fs.read"},
		{name: "another pack's state", reach: "read", target: sibling, capability: "fs.read"},
		{name: "a file outside", reach: "write", target: outside, capability: "fs.write", after: func(t *testing.T, _ tryOutcome) {
			if _, err := os.Stat(outside); !os.IsNotExist(err) {
				t.Errorf("%s exists after the refused write (%v)", outside, err)
			}
		}},
		{name: "a connection", reach: "connect", target: ln.addr(), capability: "net.outbound", after: func(t *testing.T, _ tryOutcome) {
			if n := ln.acceptedSoFar(t); n != 0 {
				t.Errorf("the listener accepted %d connections from the contained pack, want 0", n)
			}
		}},
		{name: "a process", reach: "exec", capability: "subprocess"},
		{name: "many processes", reach: "fork", target: "100", capability: "subprocess", after: func(t *testing.T, o tryOutcome) {
			if !strings.Contains(o.Error.Message, "started 0 of 100") {
				t.Errorf("fork: %q, want 0 processes started", o.Error.Message)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := s.try(t, "hostile.try", c.reach, c.target, 0)
			if o.Error != nil && o.Error.Code == codeCapabilityDenied {
				refused++
			}
			o.denied(t, c.reach, c.capability)
			if strings.Contains(o.body, apiToken) || strings.Contains(o.body, "kvdemo-state-canary") {
				t.Errorf("the refusal carries what the pack was refused: %s", o.body)
			}
			if c.after != nil {
				c.after(t, o)
			}
		})
	}
	s.kvdemoAnswers(t, "after the hostile pack")
	s.try(t, "hostile.try", "own", "", 0).succeeded(t, "own after")

	// Every refusal is counted against the pack, and nothing else is: the
	// tries that worked and the other pack's run leave the count alone.
	if refused == 0 {
		t.Fatal("the sandbox refused none of the reaches")
	}
	metrics := request(t, "GET", s.d.base+"/metrics", "", auth)
	if metrics.status != 200 {
		t.Fatalf("GET /metrics: %d %s", metrics.status, metrics.body)
	}
	series := fmt.Sprintf(`wophost_sandbox_violations_total{pack=%q,rule="capability"}`, hostileName)
	if got := metricValue(metrics.body, series); got != float64(refused) {
		t.Errorf("%s = %v after %d refused reaches, want %d:\n%s", series, got, refused, refused, grepLines(metrics.body, "wophost_sandbox_"))
	}
	kvdemoSeries := fmt.Sprintf(`wophost_sandbox_violations_total{pack=%q,rule="capability"}`, kvdemoName)
	if got := metricValue(metrics.body, kvdemoSeries); got > 0 {
		t.Errorf("%s = %v, want no violation counted against the pack that made none", kvdemoSeries, got)
	}
}

// With a memory cap, a pack that allocates past it fails the run with
// sandbox_memory_exceeded and the cap in the details, while one that
// stays under it runs; the host goes on serving another pack, and
// restarts the killed one, which then answers again.
func TestContainedPackMemoryCap(t *testing.T) {
	requireContainment(t)
	s := startSandboxHost(t, "  require_sandbox = true", fmt.Sprintf(`pack %q {
  path = %q
  sandbox { memory = "64MiB" }
}
`, hostileName, hostilePack(t, "hostile")))

	// The near miss: 16 MiB under a 64 MiB cap.
	s.try(t, "hostile.try", "alloc", strconv.Itoa(16<<20), 0).succeeded(t, "alloc of 16 MiB")
	o := s.try(t, "hostile.try", "alloc", strconv.FormatInt(4<<30, 10), 0)
	if o.Status != "failed" || o.Error == nil || o.Error.Code != codeMemoryExceeded {
		t.Fatalf("alloc of 4 GiB under a 64 MiB cap: %s, want it failed with %s", o.body, codeMemoryExceeded)
	}
	if got := o.Error.Details["limitBytes"]; got != float64(64<<20) {
		t.Errorf("details.limitBytes = %v, want %d", got, 64<<20)
	}

	s.kvdemoAnswers(t, "while the hostile pack restarts")
	deadline := time.Now().Add(time.Minute)
	for {
		p := s.packInfo(t, hostileName)
		if (p.State == host.PackReady || p.State == host.PackDegraded) && p.Restarts >= 1 {
			break
		}
		if p.State == host.PackFailed || time.Now().After(deadline) {
			t.Fatalf("the hostile pack is %s after %d restarts (%s), want it restarted and ready\n%s", p.State, p.Restarts, p.Error, s.d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.try(t, "hostile.try", "own", "", 0).succeeded(t, "own after the restart")
}

// A pack that keeps a CPU busy is stopped by the run's timeout: the run
// ends soon after it, and the host and the pack still answer.
func TestContainedPackSpinIsBounded(t *testing.T) {
	requireContainment(t)
	s := startSandboxHost(t, "  require_sandbox = true", fmt.Sprintf("pack %q { path = %q }\n", hostileName, hostilePack(t, "hostile")))

	start := time.Now()
	o := s.try(t, "hostile.try", "spin", "", 1000)
	took := time.Since(start)
	if o.Status != "failed" || o.Error == nil || (o.Error.Code != "deadline_exceeded" && o.Error.Code != "sandbox_timeout") {
		t.Fatalf("spin under a 1 s timeout: %s, want it failed with deadline_exceeded or sandbox_timeout", o.body)
	}
	if took < time.Second || took > 10*time.Second {
		t.Errorf("spin under a 1 s timeout ended after %s, want between 1 s and 10 s", took)
	}
	if r := request(t, "GET", s.d.base+"/healthz", "", nil); r.status != 200 {
		t.Errorf("healthz after the spin: %d %s", r.status, r.body)
	}
	s.kvdemoAnswers(t, "after the spin")
	s.try(t, "hostile.try", "own", "", 0).succeeded(t, "own after the spin")
}

// A pack whose manifest requires net.outbound and subprocess, on a pack
// block that allows both, may connect and run a process; what it did not
// ask for, reading the host's config, is still refused.
func TestGrantedRequirementSucceeds(t *testing.T) {
	requireContainment(t)
	s := startSandboxHost(t, "  require_sandbox = true", fmt.Sprintf(`pack %q {
  path = %q
  sandbox { allow = ["net.outbound", "subprocess"] }
}
`, grantedName, hostilePack(t, "hostile-granted")))
	ln := listen(t)

	s.try(t, "granted.try", "connect", ln.addr(), 0).succeeded(t, "connect")
	if n := ln.acceptedSoFar(t); n != 1 {
		t.Errorf("the listener accepted %d connections from the pack, want 1", n)
	}
	s.try(t, "granted.try", "exec", "", 0).succeeded(t, "exec")
	s.try(t, "granted.try", "read", s.cfg, 0).denied(t, "read of the host's config", "fs.read")
	s.try(t, "granted.try", "own", "", 0).succeeded(t, "own")
}

// A pack that requires what the policy does not allow is refused at load
// with pack_runtime_requirement_unmet, naming what is unmet, by `host
// validate` at the pack block and by `host serve` in GET /v1/packs; the
// host serves the rest. Allowing one of the two leaves the other unmet;
// allowing both loads it.
func TestUnallowedRequirementRefusedAtLoad(t *testing.T) {
	requireContainment(t)
	pack := hostilePack(t, "hostile-granted")
	config := func(packBody string) (cfg string, line int) {
		text := fmt.Sprintf(`host {
  require_sandbox = true
  http {
    listen = "127.0.0.1:0"
    tokens = [env("WOPHOST_API_TOKEN")]
  }
}
pack %q {
  path = %q
%s
}
`, grantedName, pack, packBody)
		return writeConfig(t, text), strings.Count(text[:strings.Index(text, "pack ")], "\n") + 1
	}
	// The config reads the token with env().
	t.Setenv("WOPHOST_API_TOKEN", apiToken)
	validate := func(t *testing.T, cfg string) result {
		return runHost(t, "", "--config", cfg, "validate")
	}

	for _, c := range []struct {
		name, body string
		unmet      []string
	}{
		{"nothing allowed", "", []string{"net.outbound", "subprocess"}},
		{"one of two allowed", `  sandbox { allow = ["net.outbound"] }`, []string{"subprocess"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, line := config(c.body)
			res := validate(t, cfg)
			if res.code == 0 {
				t.Fatalf("validate accepted a pack whose requirements are not allowed:\n%s%s", res.stdout, res.stderr)
			}
			for _, want := range append([]string{codeRequirementUnmet, "host.hcl:" + strconv.Itoa(line) + ":"}, c.unmet...) {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("validate does not say %q:\n%s", want, res.stderr)
				}
			}

			d := startServe(t, cfg)
			p := (&sandboxSetup{cfg: cfg, d: d}).packInfo(t, grantedName)
			if p.State != host.PackRefused {
				t.Errorf("GET /v1/packs: %s is %s, want refused", grantedName, p.State)
			}
			for _, want := range append([]string{codeRequirementUnmet}, c.unmet...) {
				if !strings.Contains(p.Error, want) {
					t.Errorf("GET /v1/packs: the error %q does not say %q", p.Error, want)
				}
			}
			if r := request(t, "GET", d.base+"/healthz", "", nil); r.status != 200 {
				t.Errorf("healthz beside the refused pack: %d %s", r.status, r.body)
			}
		})
	}

	t.Run("both allowed", func(t *testing.T) {
		cfg, _ := config(`  sandbox { allow = ["net.outbound", "subprocess"] }`)
		if res := validate(t, cfg); res.code != 0 || strings.Contains(res.stderr, codeRequirementUnmet) {
			t.Fatalf("validate with both requirements allowed: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
	})
}

// Uncontained, as `sandbox { enabled = false }` on its pack block makes
// it, the hostile pack reaches everything it tries: the threat the
// containment answers. This also shows that each reach of the pack works,
// so that a refusal in the tests above is the containment's doing.
//
// The sandbox block is the documented opt-out; a host whose config does
// not know the block yet fails to parse this config.
func TestUncontainedPackReachesEverything(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the hostile pack reads the host's environment through Linux's /proc; this is %s", runtime.GOOS)
	}
	s := startSandboxHost(t, "", fmt.Sprintf(`pack %q {
  path = %q
  sandbox { enabled = false }
}
`, hostileName, hostilePack(t, "hostile")))
	ln := listen(t)
	sibling := anotherPacksState(t, s.state)
	outside := filepath.Join(t.TempDir(), "written-by-hostile")

	if d := s.try(t, "hostile.try", "environ", "", 0).succeeded(t, "environ"); !strings.Contains(d, "WOPHOST_API_TOKEN is in it") {
		t.Errorf("environ: %q, want the host's API token seen", d)
	}
	s.try(t, "hostile.try", "read", s.cfg, 0).succeeded(t, "read of the host's config")
	s.try(t, "hostile.try", "read", sibling, 0).succeeded(t, "read of another pack's state")
	s.try(t, "hostile.try", "write", outside, 0).succeeded(t, "write outside")
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the write outside left no file: %v", err)
	}
	s.try(t, "hostile.try", "connect", ln.addr(), 0).succeeded(t, "connect")
	if n := ln.acceptedSoFar(t); n != 1 {
		t.Errorf("the listener accepted %d connections from the pack, want 1", n)
	}
	s.try(t, "hostile.try", "exec", "", 0).succeeded(t, "exec")
	if o := s.try(t, "hostile.try", "fork", "8", 0); o.succeeded(t, "fork") == "" || o.Output.Count != 8 {
		t.Errorf("fork: %s, want 8 processes started", o.body)
	}
	s.try(t, "hostile.try", "alloc", strconv.Itoa(256<<20), 0).succeeded(t, "alloc of 256 MiB")
	s.try(t, "hostile.try", "own", "", 0).succeeded(t, "own")
}

// `host packs` says in its SANDBOX column which packs are contained: by
// default every one, and not one whose block switches it off. Either
// way, the host sends its runs on the pack's execute channel (RUNS),
// which a contained pack serves inside its sandbox.
func TestContainedOrNotInHostPacks(t *testing.T) {
	requireContainment(t)
	state := filepath.Join(t.TempDir(), "state")
	cfg := sandboxConfig(t, state, "", fmt.Sprintf(`pack %q {
  path = %q
  sandbox { enabled = false }
}
`, hostileName, hostilePack(t, "hostile")))
	t.Setenv("WOPHOST_API_TOKEN", apiToken)
	res := runHost(t, "", "--config", cfg, "--log-level", "off", "packs")
	if res.code != 0 {
		t.Fatalf("host packs: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for name, want := range map[string]string{kvdemoName: "contained", hostileName: "uncontained"} {
		got := tableCell(t, res.stdout, name, "SANDBOX")
		// A kernel may lack a rule, which the column then counts.
		if got != want && !(want == "contained" && strings.HasPrefix(got, "contained (")) {
			t.Errorf("host packs: %s's SANDBOX is %q, want %q\n%s", name, got, want, res.stdout)
		}
		if got := tableCell(t, res.stdout, name, "RUNS"); got != "channel" {
			t.Errorf("host packs: %s's RUNS is %q, want channel\n%s", name, got, res.stdout)
		}
	}
}

// tableCell returns the cell of column in the row of a table as the
// commands print it (columns aligned under their headings, the first
// naming the row), trimmed.
func tableCell(t *testing.T, table, row, column string) string {
	t.Helper()
	lines := strings.Split(table, "\n")
	header := lines[0]
	start := strings.Index(header, column)
	if start < 0 {
		t.Fatalf("no column %s in:\n%s", column, table)
	}
	// A cell ends where the next heading starts; the last runs to the
	// end of its row.
	end := -1
	if i := strings.IndexFunc(header[start+len(column):], func(r rune) bool { return r != ' ' }); i >= 0 {
		end = start + len(column) + i
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, row+" ") || len(l) < start {
			continue
		}
		if end < 0 || end > len(l) {
			return strings.TrimSpace(l[start:])
		}
		return strings.TrimSpace(l[start:end])
	}
	t.Fatalf("no row %s in:\n%s", row, table)
	return ""
}
