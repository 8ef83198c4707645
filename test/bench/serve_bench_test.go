package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
)

// serveLoad is the load BenchmarkServeExecute applies.
const (
	serveWorkers  = 8
	serveDuration = 3 * time.Second
)

// echoDeployment serves test.echo from testcap and loads the probe pack.
func echoDeployment() string {
	return fmt.Sprintf(`
capability "echo" {
  plugin   = %q
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = %q
}
`, bin.testcap, bin.probePack)
}

// startServe starts `host serve` on a free loopback port with the
// capabilities and packs of deployment and returns its base URL and the
// process; the process is stopped when tb ends.
func startServe(tb testing.TB, deployment string) (string, *exec.Cmd) {
	tb.Helper()
	return startServeIn(tb, "", deployment)
}

// startServeIn is startServe with hostBody (such as a storage block)
// added to the host block.
func startServeIn(tb testing.TB, hostBody, deployment string) (string, *exec.Cmd) {
	tb.Helper()
	hostBin := binary(tb, "./cmd/host")
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "host.hcl")
	text := fmt.Sprintf(`
host {
  state_dir = %q
  http {
    listen = "127.0.0.1:0"
  }
%s}
`, filepath.Join(dir, "state"), hostBody) + deployment
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	if strings.Contains(deployment, "community.wophost.kvdemo") && strings.Contains(deployment, "promptlib") {
		publishDemoPrompt(tb, cfg)
	}
	// Info level: the address is logged at info; nothing is logged per call.
	cmd := exec.Command(hostBin, "--config", cfg, "--log-level", "info", "serve")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	serving := regexp.MustCompile(`serving: address=(\S+)`)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		return "http://" + a, cmd
	case <-time.After(startTimeout):
		tb.Fatal("host serve did not listen")
		return "", nil
	}
}

// loadResult mirrors test/loadgen's output.
type loadResult struct {
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	RPS        float64 `json:"rps"`
	P50us      float64 `json:"p50us"`
	P99us      float64 `json:"p99us"`
	FirstError string  `json:"firstError"`
}

// BenchmarkServeExecute drives POST /v1/nodes/probe.echo:execute (one
// ctx call to testcap per run) from test/loadgen, a second process on
// loopback, for a fixed time. The figures are requests per second and
// latency percentiles; b.N does not apply to a time-bounded load, so
// ns/op is reported as the mean time per request instead.
func BenchmarkServeExecute(b *testing.B) {
	base, _ := startServe(b, echoDeployment())
	load := binary(b, "./test/loadgen")
	b.ResetTimer()
	out, err := exec.Command(load, "-c", fmt.Sprint(serveWorkers), "-d", serveDuration.String(),
		"-body", `{"input":`+payload+`}`, base+"/v1/nodes/probe.echo:execute").Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("loadgen: %v", err)
	}
	var res loadResult
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("loadgen output %s: %v", out, err)
	}
	if res.Errors > 0 || res.Requests == 0 {
		b.Fatalf("%d requests, %d errors (first: %s)", res.Requests, res.Errors, res.FirstError)
	}
	b.ReportMetric(1e9/res.RPS, "ns/op")
	b.ReportMetric(res.RPS, "req/s")
	b.ReportMetric(res.P50us, "p50-µs")
	b.ReportMetric(res.P99us, "p99-µs")
}

// BenchmarkServeExecuteVsRun compares b.N POST
// /v1/nodes/probe.echo:execute requests to `host serve`, one after another
// on one kept-alive connection, with b.N runs of the same node through the
// host's in-process path (Host.Run with a run record, as `host run` and
// the API both write), the two taking turns in serveRounds rounds; the
// ratio is the median of the rounds'. Each host has the same
// deployment on an embedded store of its own, so both pay the record's
// write and sync; what the ratio shows is what the HTTP API adds to a run.
func BenchmarkServeExecuteVsRun(b *testing.B) {
	ctx := context.Background()
	base, _ := startServe(b, echoDeployment())
	h := startHost(b, writeConfig(b, echoDeployment()))
	url := base + "/v1/nodes/probe.echo:execute"
	body := `{"input":` + payload + `}`
	// The client writes each request and reads its answer on the calling
	// goroutine, over one connection: net/http's client would add hand-offs
	// to its own reading and writing goroutines, which are the client's
	// cost, not the host's.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	answers := bufio.NewReader(conn)
	posts := func(n int) error {
		for range n {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			if err := req.Write(conn); err != nil {
				return err
			}
			resp, err := http.ReadResponse(answers, req)
			if err != nil {
				return err
			}
			answer, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("POST :execute answered %s: %s", resp.Status, answer)
			}
		}
		return nil
	}
	runs := func(n int) error {
		for range n {
			if _, err := h.Run(ctx, "probe.echo", json.RawMessage(payload), host.RunOptions{Record: true}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, warm := range []func(int) error{runs, posts} {
		if err := warm(warmCalls); err != nil {
			b.Fatal(err)
		}
	}
	took, ratios := timeRounds(b, serveRounds, runs, posts)
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "run-ns/run")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "serve-ns/run")
	b.ReportMetric(slices.Min(ratios), "serve/run-min")
	b.ReportMetric(slices.Max(ratios), "serve/run-max")
	b.ReportMetric(median(ratios), "serve/run")
}

// serveRounds is how many rounds BenchmarkServeExecuteVsRun splits its
// requests and runs into: a record's sync takes most of each, and the
// disk's latency drifts more than either path's own cost, so the ratio is
// the median of rounds in which the two took turns.
const serveRounds = 5

// TestServeBenchSetup checks the serve benchmark's setup with a short load.
func TestServeBenchSetup(t *testing.T) {
	base, _ := startServe(t, echoDeployment())
	out, err := exec.Command(binary(t, "./test/loadgen"), "-c", "2", "-d", "200ms", "-warmup", "0s",
		"-body", `{"input":`+payload+`}`, base+"/v1/nodes/probe.echo:execute").Output()
	if err != nil {
		t.Fatalf("loadgen: %v", err)
	}
	var res loadResult
	if err := json.Unmarshal(out, &res); err != nil || res.Requests == 0 || res.Errors != 0 {
		t.Fatalf("loadgen: %s (%v)", out, err)
	}
}
