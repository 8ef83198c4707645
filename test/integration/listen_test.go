package integration

import (
	"net"
	"strings"
	"testing"
)

// A listen address another process holds is a reported failure (exit 1,
// not the usage error's 2) whose message names the address and where the
// config sets it, before any plugin starts.
func TestServePortInUseExitsOne(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	cfg := writeConfig(t, `host {
  http {
    listen = "`+addr+`"
  }
}
capability "echo" { plugin = "BIN/testcap" }
`)
	res := runHost(t, "", "--config", cfg, "serve")
	if res.code != 1 {
		t.Fatalf("serve on a port in use: exit %d, want 1\n%s", res.code, res.stderr)
	}
	for _, want := range []string{"Error: cannot listen on " + addr, "host.hcl:3:14", "already in use"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("serve's error lacks %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "capability ready") {
		t.Errorf("a plugin started although the port was taken:\n%s", res.stderr)
	}
}
