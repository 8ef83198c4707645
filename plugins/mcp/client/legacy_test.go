package client

import (
	"encoding/json"
	"strings"
	"testing"
)

// The Go SDK server restricted to 2025-11-25 is reached through the
// backward-compatibility path, and its server-to-client requests are
// answered by the same InputAnswerer as input requests.
func TestLegacyGoSDKServer(t *testing.T) {
	run := func(t *testing.T, opts Options) {
		opts.Inputs = &answerer{name: "wophost", sampling: "hi", roots: `{"roots":[{"uri":"file:///srv/data"}]}`}
		c := newClient(t, opts)
		res, err := c.CallTool(ctx(t), "add", json.RawMessage(`{"a":2,"b":40}`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res), `"structuredContent":{"sum":42}`) {
			t.Errorf("add = %s", res)
		}
		if e, v := c.state(); e != eraLegacy || v != RevisionLegacy {
			t.Errorf("era %v %q, want legacy %s", e, v, RevisionLegacy)
		}
		res, err = c.CallTool(ctx(t), "ask", json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := text(t, res), "elicit accept wophost; root file:///srv/data; sampling hi"; got != want {
			t.Errorf("ask = %q, want %q", got, want)
		}
		res, err = c.ReadResource(ctx(t), "file:///greeting")
		if err != nil || !strings.Contains(string(res), "hello from gosdk") {
			t.Errorf("read = %s %v", res, err)
		}
		if h := c.Health(ctx(t)); h.Status != StatusReachable || h.ProtocolVersion != RevisionLegacy {
			t.Errorf("health = %+v", h)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		run(t, Options{Stdio: stdio(serverBinary(t, gosdkPkg), "-legacy")})
	})
	t.Run("http", func(t *testing.T) {
		run(t, Options{HTTP: &HTTPOptions{URL: startGoSDKHTTP(t, "-legacy")}})
	})
}

// With declining answers the legacy server hears a decline, an error for
// roots and sampling, and still completes the call.
func TestLegacyServerRequestsDeclined(t *testing.T) {
	c := newClient(t, Options{Stdio: stdio(serverBinary(t, gosdkPkg), "-legacy"), Inputs: &answerer{}})
	res, err := c.CallTool(ctx(t), "ask", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); !strings.HasPrefix(got, "elicit decline") || !strings.Contains(got, "sampling declined") {
		t.Errorf("ask = %q", got)
	}
}

// The same Go SDK server without -legacy is a modern one.
func TestModernGoSDKServer(t *testing.T) {
	for _, opts := range []Options{
		{Stdio: stdio(serverBinary(t, gosdkPkg))},
		{HTTP: &HTTPOptions{URL: startGoSDKHTTP(t)}},
	} {
		c := newClient(t, opts)
		res, err := c.CallTool(ctx(t), "add", json.RawMessage(`{"a":1,"b":2}`))
		if err != nil || !strings.Contains(string(res), `"sum":3`) {
			t.Errorf("add = %s %v", res, err)
		}
		if e, _ := c.state(); e != eraModern {
			t.Errorf("era = %v, want modern", e)
		}
	}
}
