package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveConfig is the probe deployment with an http block; httpBody is
// the block's body. The listener binds port 0 and the test reads the
// port from the host's log.
func serveConfig(t *testing.T, httpBody, extra string) string {
	t.Helper()
	return writeConfig(t, `
host {
  plugin_dir = "BIN"
  http {
    listen = "127.0.0.1:0"
`+httpBody+`
  }
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = "`+probePack(t)+`"
  # The test has it write where the test looks, or start processes:
  # it runs uncontained (containment has its own tests).
  sandbox { enabled = false }
}
`+extra)
}

// daemon is one `host serve` process.
type daemon struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}

	mu     sync.Mutex
	stderr bytes.Buffer
}

var servingLine = regexp.MustCompile(`serving: address=(\S+)`)

// startServe starts `host serve` and waits until it listens.
func startServe(t *testing.T, cfg string, env ...string) *daemon {
	t.Helper()
	cmd := exec.Command(bin.host, "--config", cfg, "serve")
	cmd.Env = append(os.Environ(), env...)
	return startServeCommand(t, cmd)
}

// startServeCommand starts cmd, which runs `host serve` (possibly through
// a wrapper that execs it), and waits until it listens.
func startServeCommand(t *testing.T, cmd *exec.Cmd) *daemon {
	t.Helper()
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	pipe, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			d.mu.Lock()
			d.stderr.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
	}()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			_ = d.cmd.Wait()
		}
	})
	select {
	case a := <-addr:
		d.base = "http://" + a
	case <-d.done:
		_ = d.cmd.Wait()
		t.Fatalf("host serve exited before listening:\n%s", d.log())
	case <-time.After(time.Minute):
		t.Fatalf("host serve did not listen within a minute:\n%s", d.log())
	}
	return d
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// stop sends sig and waits for the process to exit, returning its code.
func (d *daemon) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-d.done
	err := d.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}

// waitForLog waits until the host's log contains s.
func (d *daemon) waitForLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if strings.Contains(d.log(), s) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the host never logged %q:\n%s", s, d.log())
}

type reply struct {
	status int
	header http.Header
	body   string
}

func request(t *testing.T, method, url, body string, header map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// requestAsync sends a request from a goroutine of its own and delivers
// the reply on the channel; a failed request is a reply of status 0 whose
// body holds the error, so a test waiting on it never hangs.
func requestAsync(method, url, body string) <-chan reply {
	out := make(chan reply, 1)
	go func() {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			out <- reply{body: err.Error()}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- reply{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			out <- reply{status: resp.StatusCode, header: resp.Header, body: err.Error()}
			return
		}
		out <- reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}()
	return out
}

func TestServeAPI(t *testing.T) {
	d := startServe(t, serveConfig(t, "", ""))

	disc := request(t, "GET", d.base+"/.well-known/openwop", "", nil)
	etag := disc.header.Get("ETag")
	if disc.status != 200 || disc.header.Get("Content-Type") != "application/json" || !strings.Contains(disc.body, `"test.echo"`) {
		t.Fatalf("discovery: %d %v %s", disc.status, disc.header, disc.body)
	}
	if !strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		t.Fatalf("ETag %q is not a strong tag", etag)
	}
	if r := request(t, "GET", d.base+"/.well-known/openwop", "", map[string]string{"If-None-Match": etag}); r.status != 304 || r.body != "" {
		t.Fatalf("If-None-Match with the current tag: %d %q, want 304 and no body", r.status, r.body)
	}
	if r := request(t, "GET", d.base+"/.well-known/openwop", "", map[string]string{"If-None-Match": `"other"`}); r.status != 200 {
		t.Fatalf("If-None-Match with another tag: %d, want 200", r.status)
	}

	ok := request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{"n":12345678901234567890}}`, nil)
	var out struct {
		Output json.RawMessage `json:"output"`
		RunID  string          `json:"runId"`
	}
	if err := json.Unmarshal([]byte(ok.body), &out); ok.status != 200 || err != nil || out.RunID == "" || !strings.Contains(string(out.Output), "12345678901234567890") {
		t.Fatalf("execute: %d %s", ok.status, ok.body)
	}

	for _, c := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"unknown node", "/v1/nodes/nope.nothing:execute", `{"input":{}}`, 404, "not_found"},
		{"no :execute", "/v1/nodes/probe.echo", `{"input":{}}`, 404, "not_found"},
		{"bad JSON", "/v1/nodes/probe.echo:execute", `{"input":`, 400, "validation_error"},
		{"unknown field", "/v1/nodes/probe.echo:execute", `{"inptu":{}}`, 400, "validation_error"},
		{"input schema", "/v1/nodes/probe.validated:execute", `{"input":{"name":"x","count":0}}`, 400, "validation_error"},
		{"capability not provided", "/v1/nodes/probe.needsai:execute", `{"input":{"marker":"/nonexistent/x"}}`, 422, "capability_not_provided"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := request(t, "POST", d.base+c.path, c.body, nil)
			e := parseRefusal(t, []byte(r.body))
			if r.status != c.status || e.Error != c.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
		})
	}
	// A node that ran and failed is its run outcome, 200, with the
	// ctx-level envelope the node got.
	failed := request(t, "POST", d.base+"/v1/nodes/probe.call:execute", `{"input":{"family":"test.echo","method":"fail"}}`, nil)
	var outcome struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
		Error  struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(failed.body), &outcome); err != nil || failed.status != 200 || outcome.RunID == "" ||
		outcome.Status != "failed" || outcome.Error.Code != "test.boom" || !outcome.Error.Retryable {
		t.Fatalf("node failure: %d %s; want 200, a failed outcome with test.boom", failed.status, failed.body)
	}

	plugins := request(t, "GET", d.base+"/v1/plugins", "", nil)
	if plugins.status != 200 || !strings.Contains(plugins.body, `"state":"ready"`) || !strings.Contains(plugins.body, `"restarts":0`) {
		t.Fatalf("plugins: %d %s", plugins.status, plugins.body)
	}
	packs := request(t, "GET", d.base+"/v1/packs", "", nil)
	if packs.status != 200 || !strings.Contains(packs.body, `"private.wophost.probe"`) {
		t.Fatalf("packs: %d %s", packs.status, packs.body)
	}
	if r := request(t, "GET", d.base+"/v1/agents", "", nil); r.status != 404 || parseRefusal(t, []byte(r.body)).Details["capability"] != "host.agents.manifestRuntime" {
		t.Fatalf("agents without agents.manifestRuntime: %d %s", r.status, r.body)
	}
	if r := request(t, "GET", d.base+"/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
	if r := request(t, "GET", d.base+"/readyz", "", nil); r.status != 200 {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	metrics := request(t, "GET", d.base+"/metrics", "", nil)
	for _, want := range []string{
		`wophost_node_runs_total{code="ok",type_id="probe.echo"} 1`,
		`wophost_node_runs_total{code="not_found",type_id="(unknown)"} 1`,
		`wophost_plugin_restarts_total{capability="echo"} 0`,
		`wophost_plugin_state{capability="echo",state="ready"} 1`,
		"wophost_node_run_duration_seconds_bucket",
		`wophost_ctx_calls_total{code="ok",family="test.echo",method="echo"} 1`,
		`wophost_ctx_calls_total{code="test.boom",family="test.echo",method="fail"} 1`,
		`wophost_ctx_calls_in_flight{family="test.echo"} 0`,
		`wophost_ctx_call_duration_seconds_count{family="test.echo",method="echo"} 1`,
	} {
		if !strings.Contains(metrics.body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, d.log())
	}
}

func TestServeAuth(t *testing.T) {
	const token = "tok-3f9a-canary"
	d := startServe(t, serveConfig(t, `tokens = [env("WOPHOST_TEST_API_TOKEN")]`, ""), "WOPHOST_TEST_API_TOKEN="+token)
	for _, path := range []string{"/.well-known/openwop", "/v1/plugins", "/v1/packs", "/metrics"} {
		for name, header := range map[string]string{"none": "", "wrong": "Bearer nope", "basic": "Basic " + token} {
			r := request(t, "GET", d.base+path, "", map[string]string{"Authorization": header})
			if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") || parseRefusal(t, []byte(r.body)).Error != "unauthenticated" {
				t.Errorf("%s with %s token: %d %v %s", path, name, r.status, r.header, r.body)
			}
		}
		if r := request(t, "GET", d.base+path, "", map[string]string{"Authorization": "Bearer " + token}); r.status != 200 {
			t.Errorf("%s with the token: %d %s", path, r.status, r.body)
		}
	}
	if r := request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{}}`, nil); r.status != 401 {
		t.Errorf("execute without a token: %d", r.status)
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if r := request(t, "GET", d.base+probe, "", nil); r.status != 200 {
			t.Errorf("%s without a token: %d, want the probes open", probe, r.status)
		}
	}
	d.stop(t, syscall.SIGTERM)
	if strings.Contains(d.log(), token) {
		t.Errorf("the token reached the log:\n%s", d.log())
	}
}

func TestServeRefusesOpenListenerWithoutToken(t *testing.T) {
	cfg := writeConfig(t, "host {\n  http {\n    listen = \"0.0.0.0:0\"\n  }\n}\n")
	res := runHost(t, "", "--config", cfg, "serve")
	if res.code != 1 || !strings.Contains(res.stderr, "host.hcl:3:14") || !strings.Contains(res.stderr, "Unauthenticated listener beyond loopback") {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// SIGTERM stops accepting, lets the call in flight finish, then stops
// every process.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	d := startServe(t, serveConfig(t, "", ""))
	dir := t.TempDir()
	pidfile, release := filepath.Join(dir, "pids"), filepath.Join(dir, "release")
	result := requestAsync("POST", d.base+"/v1/nodes/probe.sleep:execute",
		`{"input":{"ms":600000,"inPack":true,"pidfile":"`+pidfile+`","until":"`+release+`"}}`)
	// The node has reached the pack, and stays in flight until released.
	pids := readPIDs(t, pidfile)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.waitForLog(t, "stopping")
	select {
	case r := <-result:
		t.Fatalf("the call ended before it was released: %d %s", r.status, r.body)
	default:
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-result
	if r.status != 200 || !strings.Contains(r.body, `"released":true`) {
		t.Fatalf("the call in flight at SIGTERM: %d %s", r.status, r.body)
	}
	<-d.done
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("host serve: %v\n%s", err, d.log())
	}
	assertGone(t, "after SIGTERM", pids)
}

// A `host serve` killed with SIGKILL leaves no plugin or pack behind.
func TestServeKilledLeavesNoProcess(t *testing.T) {
	d := startServe(t, serveConfig(t, "", ""))
	pidfile := filepath.Join(t.TempDir(), "pids")
	go func() {
		req, _ := http.NewRequest("POST", d.base+"/v1/nodes/probe.sleep:execute",
			strings.NewReader(`{"input":{"ms":60000,"inPack":true,"pidfile":"`+pidfile+`"}}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	pids := readPIDs(t, pidfile)
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	_ = d.cmd.Wait()
	assertGone(t, "after SIGKILL of host serve", pids)
}

// gomaxprocsMetric reads go_sched_gomaxprocs_threads from /metrics.
func gomaxprocsMetric(t *testing.T, base string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\S+)$`).FindStringSubmatch(request(t, "GET", base+"/metrics", "", nil).body)
	if m == nil {
		t.Fatal("/metrics has no go_sched_gomaxprocs_threads")
	}
	return m[1]
}

// The host block's gomaxprocs sets the host process's GOMAXPROCS, and a
// reload without it gives the process back what it started with.
func TestServeGoMaxProcs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to tell gomaxprocs = 1 from the default")
	}
	cfg := serveConfig(t, "", "")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	withSetting := strings.Replace(string(text), "host {\n", "host {\n  gomaxprocs = 1\n", 1)
	if err := os.WriteFile(cfg, []byte(withSetting), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startServe(t, cfg)
	if got := gomaxprocsMetric(t, d.base); got != "1" {
		t.Fatalf("GOMAXPROCS with gomaxprocs = 1: %s", got)
	}
	if err := os.WriteFile(cfg, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitForLog(t, "reloaded")
	if got := gomaxprocsMetric(t, d.base); got == "1" {
		t.Fatal("GOMAXPROCS stayed 1 after a reload without gomaxprocs")
	}
}

// A client that trickles its request body cannot hold a connection past
// read_timeout, and many such clients do not keep others out.
func TestServeSlowClientsAreCut(t *testing.T) {
	d := startServe(t, serveConfig(t, "    read_timeout = \"1s\"\n    read_header_timeout = \"1s\"\n", ""))
	addr := strings.TrimPrefix(d.base, "http://")
	const clients = 20
	took := make(chan time.Duration, clients)
	for range clients {
		go func() {
			t0 := time.Now()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				took <- -1
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /v1/nodes/probe.echo:execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
			// One byte every 100 ms, for far longer than read_timeout,
			// until the host closes the connection.
			go func() {
				for range 300 {
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.Copy(io.Discard, conn)
			took <- time.Since(t0)
		}()
	}
	// Meanwhile a client that sends its request at once is served.
	if r := request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{"ok":true}}`, nil); r.status != 200 {
		t.Fatalf("a prompt client beside the slow ones: %d %s", r.status, r.body)
	}
	var longest time.Duration
	for range clients {
		d := <-took
		if d < 0 {
			t.Fatal("could not connect")
		}
		longest = max(longest, d)
	}
	t.Logf("%d trickling clients cut after at most %s (read_timeout 1s)", clients, longest.Round(time.Millisecond))
	if longest > 5*time.Second {
		t.Fatalf("a trickling client held its connection for %s with read_timeout = 1s", longest)
	}
}
