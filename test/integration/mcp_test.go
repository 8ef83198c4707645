package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// mcpConfig wires the mcp plugin with a pass-through/hostile stdio server,
// the Go SDK conformance server and a legacy-only Go SDK server, next to
// the probe pack that calls them as any pack would.
func mcpConfig(t *testing.T) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "mcp" {
  plugin = %q
  config {
    max_rounds        = 3
    max_message_bytes = 1048576
    server "scripted" {
      command = [%q]
      timeout = "2s"
    }
    server "everything" {
      command = [%q]
      elicitation {
        policy  = "fixed"
        answers = { name = "wophost", ok = "true" }
      }
      root {
        uri  = "file:///srv/data"
        name = "data"
      }
    }
    server "legacy" {
      command          = [%q, "-legacy"]
      discover_timeout = "2s"
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/mcp"), binary(t, "./test/mcpservers/scripted"),
		binary(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"),
		binary(t, "./test/mcpservers/gosdk"), mcpPack(t)))
}

// mcpPack lays out the test pack that calls the family through ctx.MCP.
func mcpPack(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mcppack")
	if err := testbin.LayOutPack("test/mcpservers/mcppack", binary(t, "./test/mcpservers/mcppack"), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mcpCall runs the test pack's node for one mcp method and returns the
// node's output or its error.
func mcpCall(t testing.TB, h *host.Host, method, payload string) (json.RawMessage, error) {
	t.Helper()
	in := `{"method":"` + method + `","request":` + payload + `}`
	res, err := h.Run(context.Background(), "mcppack.call", json.RawMessage(in), host.RunOptions{Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	return res.Output, nil
}

// passthrough is what test/mcpservers/scripted's passthrough tool returns.
const passthrough = `{"resultType":"complete","content":[{"type":"text","text":"pass","annotations":{"audience":["user"],"priority":0.5},"futureBlockField":{"x":1}}],` +
	`"structuredContent":null,"isError":true,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"1.0.0"},"vendor.example/trace":"t-1"},` +
	`"big":12345678901234567890,"small":1e-400,"precise":3.141592653589793238462643383279,"neg":-0,` +
	`"deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{"k":[{"l":[1,2,{"m":null}]}]}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"unicode":"h\u00e9llo <&> \ud83d\ude00","unknownTopLevel":{"nested":[true,false,null]}}`

// JSON-equal, compared as text after compacting: numbers are kept as
// written, so a rounded or re-typed number shows.
func sameJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	norm := func(s string) string {
		var v any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, s)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if norm(string(got)) != norm(want) {
		t.Errorf("result altered on the way:\n got %s\nwant %s", got, want)
	}
}

func TestMCPThroughTheHost(t *testing.T) {
	m := mcpHost{startHost(t, mcpConfig(t))}
	t.Run("the mcp record and its servers are advertised", m.advertisement)
	t.Run("results and arguments pass through unaltered", m.passThrough)
	t.Run("listTools takes an empty cursor", m.listToolsCursor)
	t.Run("rejections keep their codes and JSON-RPC errors", m.rejections)
	t.Run("hostile servers leave the host healthy", m.hostileServers)
	t.Run("input requests are answered by the host", m.inputRequired)
	t.Run("a legacy server is served", m.legacyServer)
	t.Run("serverHealth reports each server reachable at its revision", m.serverHealth)
}

// mcpHost is a host serving mcp with the everything, legacy and scripted
// servers.
type mcpHost struct {
	h *host.Host
}

func (m mcpHost) advertisement(t *testing.T) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(m.h.Registry().Document(), &doc); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Client           json.RawMessage `json:"client"`
		Revisions        []string        `json:"revisions"`
		PreferredVersion string          `json:"preferredVersion"`
		MinimumRevision  string          `json:"minimumRevision"`
		RefreshedAt      string          `json:"refreshedAt"`
		MRTR             map[string]int  `json:"mrtr"`
	}
	if err := json.Unmarshal(doc["mcp"], &rec); err != nil {
		t.Fatalf("mcp record %s: %v", doc["mcp"], err)
	}
	// OpenWOP's client facet is the constant true; the servers are in
	// the plugin record's details.
	var servers []string
	for _, r := range m.h.Registry().Records() {
		var d struct {
			Servers []string `json:"servers"`
		}
		if json.Unmarshal(r.Details["mcp"], &d) == nil && d.Servers != nil {
			servers = d.Servers
		}
	}
	if strings.Join(servers, ",") != "everything,legacy,scripted" {
		t.Errorf("servers in the plugin record's details: %v", servers)
	}
	if string(rec.Client) != "true" || rec.PreferredVersion != "2026-07-28" ||
		strings.Join(rec.Revisions, ",") != "2026-07-28,2025-11-25" || rec.MinimumRevision != "2025-11-25" ||
		rec.RefreshedAt == "" || rec.MRTR["maxRounds"] != 3 {
		t.Errorf("mcp record = %s", doc["mcp"])
	}
	validDiscovery(t, m.h.Registry().Document())
}

func (m mcpHost) passThrough(t *testing.T) {
	out, err := mcpCall(t, m.h, "callTool", `{"serverId":"scripted","name":"passthrough"}`)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, out, passthrough)
	// The pack's arguments reach the server unaltered too.
	out, err = mcpCall(t, m.h, "callTool", `{"serverId":"scripted","name":"echo_params","arguments":{"n":12345678901234567890,"s":"<&>"}}`)
	if err != nil || !strings.Contains(string(out), `"arguments":{"n":12345678901234567890,"s":"`) {
		t.Errorf("echo_params = %s %v", out, err)
	}
}

func (m mcpHost) listToolsCursor(t *testing.T) {
	out, err := mcpCall(t, m.h, "listTools", `{"serverId":"scripted","cursor":""}`)
	if err != nil || !strings.Contains(string(out), `"echo_params"`) || !strings.Contains(string(out), `"cacheScope":"private"`) {
		t.Errorf("empty cursor page = %s %v", out, err)
	}
}

func (m mcpHost) rejections(t *testing.T) {
	_, err := mcpCall(t, m.h, "callTool", `{"serverId":"nope","name":"x"}`)
	if wop.CodeOf(err) != wop.CodeNotFound {
		t.Errorf("unknown server: %v", err)
	}
	_, err = mcpCall(t, m.h, "callTool", `{"serverId":"scripted","name":"tool_error"}`)
	we := wop.AsError(err)
	if we == nil || we.Code != wop.CodeMCPError {
		t.Fatalf("JSON-RPC error: %v", err)
	}
	var d struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(we.Details, &d); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, d.Error, `{"code":-32602,"message":"Unknown tool","data":{"tool":"tool_error","big":12345678901234567890,"nested":{"a":[1,{"b":null}]}}}`)
}

func (m mcpHost) hostileServers(t *testing.T) {
	for _, tool := range []string{"malformed", "wrong_id", "oversize", "silent", "exit", "unknown_result_type", "input_loop"} {
		_, err := mcpCall(t, m.h, "callTool", `{"serverId":"scripted","name":"`+tool+`"}`)
		if wop.CodeOf(err) != wop.CodeUpstreamUnavailable {
			t.Errorf("%s: %v, want upstream_unavailable", tool, err)
		}
		if _, err := mcpCall(t, m.h, "callTool", `{"serverId":"everything","name":"test_simple_text"}`); err != nil {
			t.Errorf("good server after %s: %v", tool, err)
		}
	}
}

func (m mcpHost) inputRequired(t *testing.T) {
	for tool, want := range map[string]string{
		"test_input_required_result_elicitation":   "Hello, wophost!",
		"test_input_required_result_list_roots":    "Client exposed 1 root(s): file:///srv/data",
		"test_input_required_result_request_state": "state-ok",
		"test_input_required_result_multi_round":   "Multi-round complete: wophost likes",
	} {
		out, err := mcpCall(t, m.h, "callTool", `{"serverId":"everything","name":"`+tool+`","arguments":{}}`)
		if err != nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "input_required") {
			t.Errorf("%s = %s %v", tool, out, err)
		}
	}
	// Sampling needs aiEnvelope, which this host does not advertise:
	// it is not declared, the request the server makes anyway is
	// declined, the server keeps asking, the rounds run out.
	_, err := mcpCall(t, m.h, "callTool", `{"serverId":"everything","name":"test_input_required_result_sampling","arguments":{}}`)
	if wop.CodeOf(err) != wop.CodeUpstreamUnavailable {
		t.Errorf("sampling without aiEnvelope: %v", err)
	}
}

func (m mcpHost) legacyServer(t *testing.T) {
	out, err := mcpCall(t, m.h, "callTool", `{"serverId":"legacy","name":"add","arguments":{"a":20,"b":22}}`)
	if err != nil || !strings.Contains(string(out), `"sum":42`) {
		t.Errorf("legacy add = %s %v", out, err)
	}
	out, err = mcpCall(t, m.h, "readResource", `{"serverId":"legacy","uri":"file:///greeting"}`)
	if err != nil || !strings.Contains(string(out), "hello from gosdk") {
		t.Errorf("legacy read = %s %v", out, err)
	}
}

func (m mcpHost) serverHealth(t *testing.T) {
	for id, want := range map[string]string{"everything": "2026-07-28", "legacy": "2025-11-25", "scripted": "2026-07-28"} {
		out, err := mcpCall(t, m.h, "serverHealth", `{"serverId":"`+id+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if string(got["status"]) != `"reachable"` || string(got["protocolVersion"]) != `"`+want+`"` || got["checkedAt"] == nil {
			t.Errorf("%s health = %s", id, out)
		}
		for k := range got {
			switch k {
			case "serverId", "status", "checkedAt", "protocolVersion", "discover":
			default:
				t.Errorf("%s health has unexpected field %q", id, k)
			}
		}
		if (id == "legacy") != (got["discover"] == nil) {
			t.Errorf("%s health discover = %s", id, got["discover"])
		}
	}
}

// A sampling request is answered through the host's aiEnvelope when it is
// advertised: here the real aiEnvelope plugin with its offline local
// provider.
func TestMCPSamplingThroughAIEnvelope(t *testing.T) {
	path := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "ai" {
  plugin = %q
  config {
    default_provider = "local"
    provider "local" {
      type  = "local"
      rules = file("rules.json")
    }
  }
}
capability "mcp" {
  plugin = %q
  config {
    server "everything" {
      command = [%q]
    }
  }
}
pack "private.wophost.mcppack" { path = %q }
`, binary(t, "./plugins/aienvelope"), binary(t, "./plugins/mcp"),
		binary(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"), mcpPack(t)))
	rules := `{"rules":[{"match":"(?i)capital of France","text":"Paris"}]}`
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "rules.json"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHost(t, path)
	out, err := mcpCall(t, h, "callTool", `{"serverId":"everything","name":"test_input_required_result_sampling","arguments":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "Sampling response: Paris") {
		t.Errorf("result = %s", out)
	}
}
