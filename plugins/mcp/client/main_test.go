package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// Test server binaries, built once for the package.
var servers *testbin.Cache

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wophost-mcp-client-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	servers = testbin.NewCache(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serverBinary builds one of the test servers.
func serverBinary(t testing.TB, pkg string) string {
	t.Helper()
	p, err := servers.Binary(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	everythingPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"
	gosdkPkg      = "./test/mcpservers/gosdk"
	scriptedPkg   = "./test/mcpservers/scripted"
)

// answerer is a test InputAnswerer with fixed answers.
type answerer struct {
	caps     string
	name     string // elicitation answer; empty declines
	color    string
	sampling string // empty declines
	roots    string // JSON result; empty declines

	mu    sync.Mutex
	asked []string
}

func (a *answerer) Capabilities(context.Context) json.RawMessage {
	if a.caps != "" {
		return json.RawMessage(a.caps)
	}
	return json.RawMessage(`{"elicitation":{},"sampling":{},"roots":{}}`)
}

func (a *answerer) Answer(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	a.mu.Lock()
	a.asked = append(a.asked, method)
	a.mu.Unlock()
	switch method {
	case "elicitation/create":
		if a.name == "" {
			return json.RawMessage(`{"action":"decline"}`), nil
		}
		if strings.Contains(string(params), `"ok"`) {
			return json.RawMessage(`{"action":"accept","content":{"ok":true}}`), nil
		}
		if strings.Contains(string(params), `"color"`) {
			return json.RawMessage(`{"action":"accept","content":{"color":"` + a.color + `"}}`), nil
		}
		return json.RawMessage(`{"action":"accept","content":{"name":"` + a.name + `"}}`), nil
	case "sampling/createMessage":
		if a.sampling == "" {
			return nil, fmt.Errorf("declined")
		}
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"` + a.sampling + `"},"model":"test-model","stopReason":"endTurn"}`), nil
	case "roots/list":
		if a.roots == "" {
			return nil, fmt.Errorf("declined")
		}
		return json.RawMessage(a.roots), nil
	}
	return nil, fmt.Errorf("unknown %s", method)
}

// newClient returns a client closed at the end of the test.
func newClient(t testing.TB, opts Options) *Client {
	t.Helper()
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 30 * time.Second
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startEverythingHTTP runs the Go SDK conformance server over HTTP and
// returns its endpoint once it answers.
func startEverythingHTTP(t testing.TB) string {
	t.Helper()
	bin := serverBinary(t, everythingPkg)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "-http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("everything-server did not start listening")
	return ""
}

// startGoSDKHTTP runs the gosdk test server over HTTP.
func startGoSDKHTTP(t testing.TB, args ...string) string {
	t.Helper()
	bin := serverBinary(t, gosdkPkg)
	cmd := exec.Command(bin, append(args, "-http", "127.0.0.1:0")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("gosdk server: %v", err)
	}
	return strings.TrimSpace(line)
}

func stdio(bin string, args ...string) *StdioOptions {
	return &StdioOptions{Command: append([]string{bin}, args...), Dir: filepath.Dir(bin)}
}
