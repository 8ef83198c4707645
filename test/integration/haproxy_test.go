package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// haproxyBlock is the HAProxy config of docs/several-hosts.md.
var haproxyBlock = regexp.MustCompile("(?s)```haproxy\n(.*?)```")

// haproxyServer is a server line of that config.
var haproxyServer = regexp.MustCompile(`(?m)^\s*server \S+ \S+ check\s*$\n?`)

// The load balancer of docs/several-hosts.md sends a request that finds
// its host dead to another host at once: with two hosts behind the
// documented config and the dead one still counted healthy (its health
// checks slowed to a minute, so that none runs during the test), every
// request succeeds. Without `option redispatch` each request picked for
// the dead host is retried on it alone and fails.
func TestHAProxyExampleRedispatchesFromADeadHost(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("WOPHOST_TEST_HAPROXY") != "" {
			t.Fatal("WOPHOST_TEST_HAPROXY is set and haproxy is not installed")
		}
		t.Skip("haproxy is not installed (set WOPHOST_TEST_HAPROXY=1 to require it)")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "several-hosts.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := haproxyBlock.FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/several-hosts.md has no haproxy block")
	}
	cfg := serveConfig(t, "", "")
	dead, live := startServe(t, cfg), startServe(t, cfg)
	front := freeAddress(t)
	servers := fmt.Sprintf("  server dead %s check\n  server live %s check\n",
		strings.TrimPrefix(dead.base, "http://"), strings.TrimPrefix(live.base, "http://"))
	text := string(m[1])
	text = haproxyServer.ReplaceAllString(text, "")
	text = strings.Replace(text, "bind :8080", "bind "+front, 1)
	text = strings.Replace(text, "inter 2s", "inter 1m", 1)
	if !strings.Contains(text, "bind "+front) || !strings.Contains(text, "inter 1m") {
		t.Fatalf("the documented config no longer has the lines the test adapts:\n%s", text)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(text+servers), 0o644); err != nil {
		t.Fatal(err)
	}
	lb := exec.Command(haproxy, "-db", "-f", path)
	var lbLog strings.Builder
	lb.Stdout, lb.Stderr = &lbLog, &lbLog
	if err := lb.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Process.Kill(); _ = lb.Wait() })

	client := &http.Client{Timeout: 30 * time.Second}
	base := "http://" + front
	waitUntil(t, "HAProxy to forward", func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	if code := dead.stop(t, syscall.SIGKILL); code == 0 {
		t.Fatal("the killed host exited 0")
	}
	const requests = 20
	failed := 0
	for i := 0; i < requests; i++ {
		resp, err := client.Post(base+"/v1/nodes/probe.echo:execute", "application/json", strings.NewReader(`{"input":{"ok":true}}`))
		if err != nil {
			failed++
			t.Logf("request %d: %v", i, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed++
			t.Logf("request %d: %s", i, resp.Status)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed with one of two hosts dead\nHAProxy's log:\n%s", failed, requests, lbLog.String())
	}
}

// freeAddress returns a loopback address with a port nobody listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
