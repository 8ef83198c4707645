package integration

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requiredConfig is a deployment whose one capability, "req", is
// required and runs a copy of testcap the test may replace. It returns
// the config and the copy's path.
func requiredConfig(t *testing.T) (cfg, plugin string) {
	t.Helper()
	plugin = filepath.Join(t.TempDir(), "reqcap")
	copyExecutable(t, bin.testcap, plugin, 0o755)
	return writeConfig(t, `
host {
  plugin_dir = "BIN"
  http { listen = "127.0.0.1:0" }
}
capability "req" {
  plugin   = "`+plugin+`"
  families = ["test.echo"]
  required = true
}
`), plugin
}

// A required capability that cannot become ready stops `host serve` from
// starting: it exits with an error naming the capability and never
// listens.
func TestServeRefusesToStartWithoutARequiredCapability(t *testing.T) {
	cfg, plugin := requiredConfig(t)
	replaceWithFailing(t, plugin)
	cmd := exec.Command(bin.host, "--config", cfg, "serve")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	// Read the log until the process exits or says it serves.
	var stderr strings.Builder
	served := false
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if servingLine.MatchString(sc.Text()) {
			served = true
			break
		}
	}
	if served {
		t.Fatalf("host serve served without its required capability:\n%s", stderr.String())
	}
	err = cmd.Wait()
	if err == nil {
		t.Fatalf("host serve exited 0 without its required capability:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "Required capability is not ready") || !strings.Contains(stderr.String(), `Capability "req"`) {
		t.Errorf("the error does not name the required capability:\n%s", stderr.String())
	}
}

// /readyz is 503, with the reason, while a required capability is down:
// here it is killed and can never start again, so it restarts in vain and
// then stays failed.
func TestReadyzIs503WhileARequiredCapabilityIsDown(t *testing.T) {
	cfg, plugin := requiredConfig(t)
	d := startServe(t, cfg)
	if r := request(t, "GET", d.base+"/readyz", "", nil); r.status != 200 {
		t.Fatalf("/readyz with the required capability ready: %d %s", r.status, r.body)
	}
	pids := childrenOf(d.cmd.Process.Pid, "reqcap")
	if len(pids) != 1 {
		t.Fatalf("plugin processes of req: %v, want one", pids)
	}
	replaceWithFailing(t, plugin)
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var last reply
	waitFor(t, "/readyz to answer 503 naming req", func() bool {
		last = request(t, "GET", d.base+"/readyz", "", nil)
		return last.status == 503 && strings.Contains(last.body, "req")
	})
	if e := parseRefusal(t, []byte(last.body)); e.Error != "runner_unavailable" || e.Details["status"] != "not ready" || e.Details["reason"] == "" {
		t.Errorf("/readyz body %s, want runner_unavailable, status \"not ready\" and a reason", last.body)
	}
	// It stays 503 for as long as the capability is down, through every
	// attempt and after the last.
	waitFor(t, "req to be given up", func() bool {
		return strings.Contains(request(t, "GET", d.base+"/v1/plugins", "", nil).body, "gave up after 5 restart attempts")
	})
	if r := request(t, "GET", d.base+"/readyz", "", nil); r.status != 503 || !strings.Contains(r.body, "req") {
		t.Errorf("/readyz with the required capability failed: %d %s", r.status, r.body)
	}
}

// shutdown_timeout bounds the drain: a node still running when it is
// over does not hold the stop, and nothing of the host is left.
func TestServeShutdownTimeoutBoundsTheDrain(t *testing.T) {
	d := startServe(t, serveConfig(t, `shutdown_timeout = "1s"`, ""))
	pidfile := filepath.Join(t.TempDir(), "pids")
	go func() {
		// The answer, if any, does not matter: the run is cut short.
		req := `{"input":{"ms":60000,"inPack":true,"pidfile":"` + pidfile + `"}}`
		if resp, err := httpPost(d.base+"/v1/nodes/probe.sleep:execute", req); err == nil {
			resp.Body.Close()
		}
	}()
	pids := readPIDs(t, pidfile)
	pids = append(pids, childrenOf(d.cmd.Process.Pid, "")...)
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("host serve still runs 30 s after SIGTERM with shutdown_timeout = 1s:\n%s", d.log())
	}
	_ = d.cmd.Wait()
	took := time.Since(start)
	t.Logf("host serve stopped %v after SIGTERM", took.Round(time.Millisecond))
	// One second of drain, then the stop of one plugin and one pack; the
	// margin is for a loaded machine, far below the node's 60 s.
	if took > 11*time.Second {
		t.Errorf("host serve took %v to stop with shutdown_timeout = 1s", took)
	}
	if took < time.Second {
		t.Errorf("host serve stopped %v after SIGTERM, before shutdown_timeout let the run finish", took)
	}
	assertGone(t, "after the drain ran out", pids)
}

// The execute body's timeoutMs is the run's deadline (a failed run outcome,
// deadline_exceeded), and a body over max_message_bytes is 413
// payload_too_large before anything runs.
func TestServeExecuteBodyLimits(t *testing.T) {
	cfg := serveConfig(t, "", "")
	if err := os.WriteFile(cfg, []byte(strings.Replace(readFile(t, cfg), "host {\n", "host {\n  max_message_bytes = 65536\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startServe(t, cfg)

	start := time.Now()
	r := request(t, "POST", d.base+"/v1/nodes/probe.sleep:execute", `{"input":{"ms":60000,"inPack":true},"timeoutMs":300}`, nil)
	var outcome struct {
		Status string `json:"status"`
		Error  struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &outcome); err != nil || r.status != 200 || outcome.Status != "failed" || outcome.Error.Code != "deadline_exceeded" {
		t.Errorf("a run over its timeoutMs: %d %s, want 200, failed with deadline_exceeded", r.status, r.body)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("a run with timeoutMs 300 answered after %v", took)
	}

	// The body is over the limit while its input is small: the body
	// itself is refused, not only the payload on its way to the pack.
	big := `{"input":{"text":"x"}` + strings.Repeat(" ", 70000) + `}`
	r = request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", big, nil)
	if e := parseRefusal(t, []byte(r.body)); r.status != 413 || e.Error != "payload_too_large" || !strings.Contains(e.Message, "larger than") {
		t.Errorf("a body over max_message_bytes: %d %.300s, want 413 payload_too_large", r.status, r.body)
	}
	// The same request without the padding runs.
	r = request(t, "POST", d.base+"/v1/nodes/probe.echo:execute", `{"input":{"text":"x"}}`, nil)
	if !succeeded(r.status, r.body) {
		t.Errorf("a small body: %d %s", r.status, r.body)
	}
}

// listen and tokens take effect at the next start, not on reload: after
// a SIGHUP with both changed, the old token still opens the API, the new
// one does not, the listener stays where it was, and the log says so.
func TestServeReloadKeepsListenAndTokens(t *testing.T) {
	const oldToken, newToken = "old-token-0123456789abcdef", "new-token-0123456789abcdef"
	cfg := serveConfig(t, `tokens = ["`+oldToken+`"]`, "")
	d := startServe(t, cfg)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	if r := request(t, "GET", d.base+"/v1/plugins", "", bearer(oldToken)); r.status != 200 {
		t.Fatalf("the token at start: %d %s", r.status, r.body)
	}

	// A free address for the new listen, closed again.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	newAddr := ln.Addr().String()
	ln.Close()
	text := readFile(t, cfg)
	text = strings.Replace(text, `listen = "127.0.0.1:0"`, `listen = "`+newAddr+`"`, 1)
	text = strings.Replace(text, oldToken, newToken, 1)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitForLog(t, "listen and tokens take effect at the next start, not on reload")
	d.waitForLog(t, "reloaded; the previous host stops")

	if r := request(t, "GET", d.base+"/v1/plugins", "", bearer(oldToken)); r.status != 200 {
		t.Errorf("the old token after the reload: %d %s, want 200", r.status, r.body)
	}
	if r := request(t, "GET", d.base+"/v1/plugins", "", bearer(newToken)); r.status != 401 {
		t.Errorf("the new token after the reload: %d %s, want 401", r.status, r.body)
	}
	if c, err := net.DialTimeout("tcp", newAddr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("the host listens on the new address %s after a reload", newAddr)
	}
}

// httpPost posts a JSON body to url; it may be called from any goroutine.
func httpPost(url, body string) (*http.Response, error) {
	return http.Post(url, "application/json", strings.NewReader(body))
}
