package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

type recordedCall struct {
	family, method, body string
}

// fakeCaller behaves like a real wop.Caller: it marshals req and
// unmarshals a canned JSON answer into res.
type fakeCaller struct {
	calls  []recordedCall
	answer string
	err    error
}

func (f *fakeCaller) Call(_ context.Context, family, method string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	f.calls = append(f.calls, recordedCall{family, method, string(b)})
	if f.err != nil {
		return f.err
	}
	if res != nil && f.answer != "" {
		return json.Unmarshal([]byte(f.answer), res)
	}
	return nil
}

var withClient = map[string]json.RawMessage{
	"status": json.RawMessage(`"stable"`),
	"client": json.RawMessage(`true`),
}

// invoke calls method on c with req, so that tests can treat the four
// methods alike.
func invoke(c *Client, method string, req any) (any, error) {
	ctx := context.Background()
	switch method {
	case MethodCallTool:
		r, _ := req.(*CallToolRequest)
		return c.CallTool(ctx, r)
	case MethodListTools:
		r, _ := req.(*ListToolsRequest)
		return c.ListTools(ctx, r)
	case MethodReadResource:
		r, _ := req.(*ReadResourceRequest)
		return c.ReadResource(ctx, r)
	case MethodServerHealth:
		r, _ := req.(*ServerHealthRequest)
		return c.ServerHealth(ctx, r)
	}
	panic("unknown method " + method)
}

var methods = []struct {
	method string
	req    any
}{
	{MethodCallTool, &CallToolRequest{ServerID: "docs", Name: "search"}},
	{MethodListTools, &ListToolsRequest{ServerID: "docs"}},
	{MethodReadResource, &ReadResourceRequest{ServerID: "docs", URI: "file:///a"}},
	{MethodServerHealth, &ServerHealthRequest{ServerID: "docs"}},
}

func wantNotProvided(t *testing.T, err error) {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) {
		t.Fatalf("error = %v, want *wop.Error", err)
	}
	if we.Code != wop.CodeCapabilityNotProvided || we.Capability != "host.mcp.client" {
		t.Fatalf("error = %q/%q, want %q/host.mcp.client", we.Code, we.Capability, wop.CodeCapabilityNotProvided)
	}
}

func TestNilClient(t *testing.T) {
	var c *Client
	if c.HasClient() {
		t.Error("nil client has the client facet")
	}
	for _, m := range methods {
		_, err := invoke(c, m.method, m.req)
		wantNotProvided(t, err)
	}
	if NewClient(nil, withClient) != nil {
		t.Error("NewClient(nil) is not nil")
	}
}

func TestClientFacetGate(t *testing.T) {
	f := &fakeCaller{answer: `{}`}
	c := NewClient(f, map[string]json.RawMessage{"status": json.RawMessage(`"stable"`), "revisions": json.RawMessage(`["2026-07-28"]`)})
	if c.HasClient() {
		t.Fatal("HasClient without the facet")
	}
	for _, m := range methods {
		_, err := invoke(c, m.method, m.req)
		wantNotProvided(t, err)
	}
	if len(f.calls) != 0 {
		t.Fatalf("host called %d times, want 0", len(f.calls))
	}
	if !NewClient(f, withClient).HasClient() {
		t.Fatal("HasClient false with the facet")
	}
}

func TestRequestJSON(t *testing.T) {
	tests := []struct {
		name, method string
		req          any
		want         string
	}{
		{"callTool", MethodCallTool, &CallToolRequest{ServerID: "docs", Name: "search", Arguments: json.RawMessage(`{"q":"x","n":12345678901234567890}`)},
			`{"serverId":"docs","name":"search","arguments":{"q":"x","n":12345678901234567890}}`},
		{"callTool without arguments", MethodCallTool, &CallToolRequest{ServerID: "docs", Name: "ping"},
			`{"serverId":"docs","name":"ping"}`},
		{"listTools nil cursor", MethodListTools, &ListToolsRequest{ServerID: "docs"},
			`{"serverId":"docs"}`},
		{"listTools empty cursor", MethodListTools, &ListToolsRequest{ServerID: "docs", Cursor: new("")},
			`{"serverId":"docs","cursor":""}`},
		{"listTools cursor", MethodListTools, &ListToolsRequest{ServerID: "docs", Cursor: new("page-2")},
			`{"serverId":"docs","cursor":"page-2"}`},
		{"readResource", MethodReadResource, &ReadResourceRequest{ServerID: "files", URI: "file:///etc/motd"},
			`{"serverId":"files","uri":"file:///etc/motd"}`},
		{"serverHealth", MethodServerHealth, &ServerHealthRequest{ServerID: "docs"},
			`{"serverId":"docs"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCaller{answer: `{}`}
			if _, err := invoke(NewClient(f, withClient), tt.method, tt.req); err != nil {
				t.Fatal(err)
			}
			if len(f.calls) != 1 {
				t.Fatalf("calls = %d, want 1", len(f.calls))
			}
			if got, want := f.calls[0], (recordedCall{"mcp", tt.method, tt.want}); got != want {
				t.Errorf("call\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestRawResultsUnaltered(t *testing.T) {
	// Unknown fields, _meta, isError and a number past float64 precision
	// must all come back byte for byte.
	answers := map[string]string{
		MethodCallTool: `{"content":[{"type":"text","text":"boom"}],"structuredContent":{"n":12345678901234567890},` +
			`"isError":true,"_meta":{"x":1},"futureField":[null,1.50]}`,
		MethodListTools:    `{"tools":[{"name":"t","inputSchema":{},"annotations":{"x-mcp-header":"bad value"}}],"nextCursor":"","ttlMs":0,"cacheScope":"server"}`,
		MethodReadResource: `{"contents":[{"uri":"file:///a","text":"hi"}],"weird":1e400}`,
	}
	for method, answer := range answers {
		f := &fakeCaller{answer: answer}
		got, err := invoke(NewClient(f, withClient), method, methods[methodIndex(method)].req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if raw := got.(json.RawMessage); string(raw) != answer {
			t.Errorf("%s:\n got %s\nwant %s", method, raw, answer)
		}
	}
}

func methodIndex(method string) int {
	for i, m := range methods {
		if m.method == method {
			return i
		}
	}
	panic("unknown method " + method)
}

func TestServerHealthResult(t *testing.T) {
	f := &fakeCaller{answer: `{"serverId":"docs","status":"reachable","checkedAt":"2026-11-29T10:00:00Z",` +
		`"protocolVersion":"2026-07-28","discover":{"serverInfo":{"name":"docs"},"ttlMs":60000}}`}
	h, err := NewClient(f, withClient).ServerHealth(context.Background(), &ServerHealthRequest{ServerID: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	if h.ServerID != "docs" || h.Status != StatusReachable || !h.CheckedAt.Equal(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)) ||
		h.ProtocolVersion != "2026-07-28" || string(h.Discover) != `{"serverInfo":{"name":"docs"},"ttlMs":60000}` {
		t.Errorf("health = %+v", h)
	}

	b, err := json.Marshal(ServerHealthResult{ServerID: "docs", Status: StatusUnreachable, CheckedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"serverId":"docs","status":"unreachable","checkedAt":"2026-11-29T10:00:00Z"}`; string(b) != want {
		t.Errorf("marshal\n got %s\nwant %s", b, want)
	}
}

func TestCallerErrorUnchanged(t *testing.T) {
	want := &wop.Error{Code: CodeMCPError, Message: "tool failed", Details: json.RawMessage(`{"error":{"code":-32602,"message":"bad params","data":{"x":1}}}`)}
	for _, m := range methods {
		f := &fakeCaller{err: want}
		if _, err := invoke(NewClient(f, withClient), m.method, m.req); err != want {
			t.Errorf("%s: error = %#v, want %#v", m.method, err, want)
		}
	}
}

func TestNilRequest(t *testing.T) {
	for _, m := range methods {
		f := &fakeCaller{}
		if _, err := invoke(NewClient(f, withClient), m.method, nil); wop.CodeOf(err) != wop.CodeValidation {
			t.Errorf("%s(nil) = %v, want validation_error", m.method, err)
		}
		if len(f.calls) != 0 {
			t.Errorf("%s(nil): host called %d times, want 0", m.method, len(f.calls))
		}
	}
}
