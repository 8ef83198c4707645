package client

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// text returns the first text content of a CallToolResult.
func text(t testing.TB, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("result %s: %v", res, err)
	}
	for _, c := range r.Content {
		if c.Type == "text" {
			return c.Text
		}
	}
	return ""
}

// everythingTransports runs f against the Go SDK conformance server over
// stdio and over Streamable HTTP.
func everythingTransports(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Run("stdio", func(t *testing.T) {
		f(t, Options{Stdio: stdio(serverBinary(t, everythingPkg))})
	})
	t.Run("http", func(t *testing.T) {
		f(t, Options{HTTP: &HTTPOptions{URL: startEverythingHTTP(t)}})
	})
}

func TestEverythingServerToolsAndResources(t *testing.T) {
	everythingTransports(t, func(t *testing.T, opts Options) {
		c := newClient(t, opts)
		page, err := c.ListTools(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(page), `"test_simple_text"`) || !strings.Contains(string(page), `"ttlMs"`) {
			t.Errorf("tools/list page lacks expected content: %.300s", page)
		}
		if e, v := c.state(); e != eraModern || v != RevisionModern {
			t.Errorf("era %v version %q, want modern %s", e, v, RevisionModern)
		}
		res, err := c.CallTool(ctx(t), "test_simple_text", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, res); got != "This is a simple text response for testing." {
			t.Errorf("text = %q", got)
		}
		// A tool failure is a result, not an error.
		res, err = c.CallTool(ctx(t), "test_error_handling", json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("test_error_handling: %v", err)
		}
		if !strings.Contains(string(res), `"isError":true`) {
			t.Errorf("test_error_handling result lacks isError: %s", res)
		}
		// An unknown tool is a JSON-RPC error.
		_, err = c.CallTool(ctx(t), "no_such_tool", nil)
		var rpc *RPCError
		if !errors.As(err, &rpc) {
			t.Fatalf("unknown tool: %v, want RPCError", err)
		}
		res, err = c.ReadResource(ctx(t), "test://static-text")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res), `"test://static-text"`) || !strings.Contains(string(res), `"contents"`) {
			t.Errorf("resources/read = %s", res)
		}
		h := c.Health(ctx(t))
		if h.Status != StatusReachable || h.ProtocolVersion != RevisionModern || !strings.Contains(string(h.Discover), `"supportedVersions"`) {
			t.Errorf("health = %+v (%s)", h, h.Discover)
		}
	})
}

func TestEverythingServerInputRequired(t *testing.T) {
	everythingTransports(t, func(t *testing.T, opts Options) {
		a := &answerer{name: "wophost", color: "blue", sampling: "Paris", roots: `{"roots":[{"uri":"file:///srv/data","name":"data"}]}`}
		opts.Inputs = a
		c := newClient(t, opts)
		for _, tc := range []struct{ tool, want string }{
			{"test_input_required_result_elicitation", "Hello, wophost!"},
			{"test_input_required_result_sampling", "Sampling response: Paris"},
			{"test_input_required_result_list_roots", "Client exposed 1 root(s): file:///srv/data"},
			{"test_input_required_result_request_state", "state-ok: requestState received and confirmation accepted"},
			{"test_input_required_result_tampered_state", "state-ok: requestState received and confirmation accepted"},
			{"test_input_required_result_multiple_inputs", "Paris wophost — 1 root(s) visible"},
			{"test_input_required_result_multi_round", "Multi-round complete: wophost likes blue"},
			{"test_input_required_result_capabilities", "Capability-aware input requests fulfilled"},
		} {
			res, err := c.CallTool(ctx(t), tc.tool, json.RawMessage(`{}`))
			if err != nil {
				t.Errorf("%s: %v", tc.tool, err)
				continue
			}
			if got := text(t, res); got != tc.want {
				t.Errorf("%s: text %q, want %q", tc.tool, got, tc.want)
			}
			if strings.Contains(string(res), "input_required") {
				t.Errorf("%s: an InputRequiredResult leaked: %s", tc.tool, res)
			}
		}
	})
}

func TestEverythingServerDeclinedInputExhaustsRounds(t *testing.T) {
	everythingTransports(t, func(t *testing.T, opts Options) {
		opts.Inputs = &answerer{}
		opts.MaxRounds = 3
		c := newClient(t, opts)
		// Declined elicitation: the server asks again every round.
		_, err := c.CallTool(ctx(t), "test_input_required_result_elicitation", json.RawMessage(`{}`))
		var te *TransportError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "after 3 rounds") {
			t.Errorf("declined elicitation: %v, want an exhausted-rounds TransportError", err)
		}
		// Declined sampling (no aiEnvelope): likewise.
		_, err = c.CallTool(ctx(t), "test_input_required_result_sampling", json.RawMessage(`{}`))
		if !errors.As(err, &te) {
			t.Errorf("declined sampling: %v, want TransportError", err)
		}
		// Without capabilities the server asks for nothing.
		opts.Inputs = &answerer{caps: `{}`}
		c2 := newClient(t, opts)
		res, err := c2.CallTool(ctx(t), "test_input_required_result_capabilities", json.RawMessage(`{}`))
		if err != nil || text(t, res) != "No declared client capability supports an in-band input request" {
			t.Errorf("capabilities {}: %s %v", res, err)
		}
	})
}
