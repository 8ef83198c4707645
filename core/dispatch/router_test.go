package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/wop"
)

// invocation is one call a fakeInvoker received.
type invocation struct {
	family, method string
	payload        []byte
	call           wop.CallContext
	deadline       time.Time
	hasDeadline    bool
}

// fakeInvoker records its calls and answers with result/err, or with fn
// when set.
type fakeInvoker struct {
	mu     sync.Mutex
	calls  []invocation
	result []byte
	err    error
	fn     func(ctx context.Context) ([]byte, error)
}

func (f *fakeInvoker) Invoke(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	dl, ok := ctx.Deadline()
	f.mu.Lock()
	f.calls = append(f.calls, invocation{family: family, method: method, payload: payload, call: call, deadline: dl, hasDeadline: ok})
	f.mu.Unlock()
	if f.fn != nil {
		return f.fn(ctx)
	}
	return f.result, f.err
}

func (f *fakeInvoker) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

const (
	testDepthLimit = 4
	testMaxBytes   = 16
)

func facets(names ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for _, n := range names {
		m[n] = json.RawMessage(`{}`)
	}
	return m
}

// newTestRouter serves aiEnvelope (no await facet), mcp (no client facet)
// and acme.kv, all from inv.
func newTestRouter(inv registry.Invoker) *Router {
	reg := registry.New(registry.Implementation{Name: "wophost", Version: "test"})
	reg.Declare("ai", "plugin-ai")
	reg.Ready("ai", []registry.Family{
		{Name: wop.FamilyAIEnvelope, Methods: []string{"generate", "await"}, Facets: facets("tools")},
		{Name: wop.FamilyMCP, Methods: []string{"callTool"}, Facets: facets("server")},
	}, inv)
	reg.Declare("kv", "plugin-kv")
	reg.Ready("kv", []registry.Family{{Name: "acme.kv", Methods: []string{"get", "put"}}}, inv)
	return NewRouter(reg, testDepthLimit, testMaxBytes)
}

var allowAll = Caller{Name: "pack:demo", Allowed: func(string, string) bool { return true }}

func wantWopError(t *testing.T, err error, code, capability string) *wop.Error {
	t.Helper()
	var we *wop.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *wop.Error", err, err)
	}
	if we.Code != code {
		t.Fatalf("code = %q, want %q (error %v)", we.Code, code, err)
	}
	if we.Capability != capability {
		t.Fatalf("capability = %q, want %q (error %v)", we.Capability, capability, err)
	}
	return we
}

func TestRouterRefusals(t *testing.T) {
	tests := []struct {
		name           string
		caller         Caller
		family, method string
		payload        []byte
		call           wop.CallContext
		code           string
		capability     string
		message        string // substring, when set
	}{
		{
			name: "unknown family", caller: allowAll, family: "acme.nope", method: "get",
			call: wop.CallContext{Depth: 1}, code: wop.CodeCapabilityNotProvided, capability: "host.acme.nope",
		},
		{
			name: "unknown core family", caller: allowAll, family: wop.FamilyPromptLibrary, method: "get",
			call: wop.CallContext{Depth: 1}, code: wop.CodeCapabilityNotProvided, capability: "host.promptLibrary",
		},
		{
			name: "await without the await facet", caller: allowAll, family: wop.FamilyAIEnvelope, method: "await",
			call: wop.CallContext{Depth: 1}, code: wop.CodeCapabilityNotProvided, capability: "host.aiEnvelope.await",
		},
		{
			name: "mcp without the client facet", caller: allowAll, family: wop.FamilyMCP, method: "callTool",
			call: wop.CallContext{Depth: 1}, code: wop.CodeCapabilityNotProvided, capability: "host.mcp.client",
		},
		{
			name:   "caller did not declare the family",
			caller: Caller{Name: "pack:demo", Allowed: func(string, string) bool { return false }},
			family: "acme.kv", method: "get", call: wop.CallContext{Depth: 1},
			code: wop.CodeCapabilityNotDeclared, capability: "host.acme.kv.get", message: "pack:demo did not declare acme.kv",
		},
		{
			name: "unknown method", caller: allowAll, family: "acme.kv", method: "watch",
			call: wop.CallContext{Depth: 1}, code: wop.CodeNotFound, capability: "host.acme.kv.watch", message: `"watch"`,
		},
		{
			name: "depth over the limit", caller: allowAll, family: "acme.kv", method: "get",
			call: wop.CallContext{Depth: testDepthLimit + 1}, code: wop.CodeCallDepthExceeded, capability: "host.acme.kv.get",
		},
		{
			name: "payload over the limit", caller: allowAll, family: "acme.kv", method: "put",
			payload: make([]byte, testMaxBytes+1), call: wop.CallContext{Depth: 1},
			code: wop.CodeValidation, capability: "host.acme.kv.put", message: "17 bytes",
		},
		{
			name: "payload over the limit is checked before the family", caller: allowAll, family: "acme.nope", method: "get",
			payload: make([]byte, testMaxBytes+1), call: wop.CallContext{Depth: 1},
			code: wop.CodeValidation, capability: "host.acme.nope.get",
		},
		{
			name: "deadline already passed", caller: allowAll, family: "acme.kv", method: "get",
			call: wop.CallContext{Depth: 1, Deadline: time.Unix(1, 0)},
			code: wop.CodeDeadlineExceeded, capability: "host.acme.kv.get",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := &fakeInvoker{result: []byte(`{}`)}
			r := newTestRouter(inv)
			out, err := r.Call(context.Background(), tt.caller, tt.family, tt.method, tt.payload, tt.call)
			if out != nil {
				t.Errorf("result = %q, want nil", out)
			}
			we := wantWopError(t, err, tt.code, tt.capability)
			if tt.message != "" && !strings.Contains(we.Message, tt.message) {
				t.Errorf("message %q does not contain %q", we.Message, tt.message)
			}
			if n := inv.count(); n != 0 {
				t.Errorf("invoker called %d times, want 0", n)
			}
		})
	}
}

func TestRouterAllowedGetsFacet(t *testing.T) {
	reg := registry.New(registry.Implementation{Name: "wophost"})
	inv := &fakeInvoker{result: []byte(`1`)}
	reg.Declare("ai", "p")
	reg.Ready("ai", []registry.Family{
		{Name: wop.FamilyAIEnvelope, Methods: []string{"generate", "await"}, Facets: facets("await")},
		{Name: wop.FamilyMCP, Methods: []string{"callTool"}, Facets: facets("client")},
	}, inv)
	r := NewRouter(reg, 2, 1024)

	tests := []struct {
		family, method string
		wantFacet      string
	}{
		{wop.FamilyAIEnvelope, "generate", ""},
		{wop.FamilyAIEnvelope, "await", "await"},
		{wop.FamilyMCP, "callTool", "client"},
	}
	for _, tt := range tests {
		t.Run(tt.family+"."+tt.method, func(t *testing.T) {
			var gotFamily, gotFacet string
			caller := Caller{Name: "plugin:x", Allowed: func(f, fc string) bool { gotFamily, gotFacet = f, fc; return false }}
			_, err := r.Call(context.Background(), caller, tt.family, tt.method, nil, wop.CallContext{Depth: 1})
			want := tt.family
			if tt.wantFacet != "" {
				want += "." + tt.wantFacet
			}
			we := wantWopError(t, err, wop.CodeCapabilityNotDeclared, "host."+tt.family+"."+tt.method)
			if !strings.HasSuffix(we.Message, "did not declare "+want) {
				t.Errorf("message %q does not name %s", we.Message, want)
			}
			if gotFamily != tt.family || gotFacet != tt.wantFacet {
				t.Errorf("Allowed(%q, %q), want Allowed(%q, %q)", gotFamily, gotFacet, tt.family, tt.wantFacet)
			}

			// With the facet both advertised and allowed the call goes through.
			if _, err := r.Call(context.Background(), allowAll, tt.family, tt.method, nil, wop.CallContext{Depth: 1}); err != nil {
				t.Fatalf("allowed call: %v", err)
			}
		})
	}
}

func TestRouterSuccess(t *testing.T) {
	inv := &fakeInvoker{result: []byte(`{"value":"abcd"}`)}
	if len(inv.result) != testMaxBytes {
		t.Fatalf("test result is %d bytes, want exactly %d", len(inv.result), testMaxBytes)
	}
	r := newTestRouter(inv)
	deadline := time.Now().Add(time.Hour)
	call := wop.CallContext{RunID: "run_1", NodeID: "n1", Caller: "pack:demo", Depth: testDepthLimit, Deadline: deadline, IdempotencyKey: "k"}
	payload := []byte(strings.Repeat("x", testMaxBytes))

	out, err := r.Call(context.Background(), Caller{Name: "operator"}, "acme.kv", "get", payload, call)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if string(out) != string(inv.result) {
		t.Fatalf("result = %q, want %q", out, inv.result)
	}
	if inv.count() != 1 {
		t.Fatalf("invoker called %d times, want 1", inv.count())
	}
	got := inv.calls[0]
	if got.family != "acme.kv" || got.method != "get" || string(got.payload) != string(payload) || got.call != call {
		t.Errorf("invocation = %+v", got)
	}
	if !got.hasDeadline || !got.deadline.Equal(deadline) {
		t.Errorf("invoker context deadline = %v (%v), want %v", got.deadline, got.hasDeadline, deadline)
	}
}

func TestRouterNoDeadlineWithoutCallDeadline(t *testing.T) {
	inv := &fakeInvoker{result: []byte(`1`)}
	r := newTestRouter(inv)
	if _, err := r.Call(context.Background(), allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1}); err != nil {
		t.Fatal(err)
	}
	if inv.calls[0].hasDeadline {
		t.Fatalf("invoker context has a deadline %v, want none", inv.calls[0].deadline)
	}
}

func TestRouterResultOverLimit(t *testing.T) {
	inv := &fakeInvoker{result: make([]byte, testMaxBytes+1)}
	r := newTestRouter(inv)
	out, err := r.Call(context.Background(), allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1})
	if out != nil {
		t.Errorf("result = %q, want nil", out)
	}
	wantWopError(t, err, wop.CodeUpstreamUnavailable, "host.acme.kv.get")
	if inv.count() != 1 {
		t.Fatalf("invoker called %d times, want 1", inv.count())
	}
}

func TestRouterCancelledContext(t *testing.T) {
	inv := &fakeInvoker{result: []byte(`1`)}
	r := newTestRouter(inv)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Call(ctx, allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1})
	wantWopError(t, err, wop.CodeCancelled, "host.acme.kv.get")
	if inv.count() != 0 {
		t.Fatalf("invoker called %d times, want 0", inv.count())
	}
}

func TestRouterContextEndsDuringCall(t *testing.T) {
	tests := []struct {
		name     string
		invErr   error
		wantCode string
	}{
		{"transport unavailable becomes cancelled", wop.Errorf(wop.CodeUnavailable, "transport closing"), wop.CodeCancelled},
		{"internal becomes cancelled", errors.New("rpc error"), wop.CodeCancelled},
		{"a contract error is kept", wop.Errorf(wop.CodeNotFound, "no such key"), wop.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			inv := &fakeInvoker{fn: func(context.Context) ([]byte, error) {
				cancel()
				return nil, tt.invErr
			}}
			r := newTestRouter(inv)
			_, err := r.Call(ctx, allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1})
			if got := wop.CodeOf(err); got != tt.wantCode {
				t.Fatalf("code = %q, want %q (error %v)", got, tt.wantCode, err)
			}
		})
	}
}

// A plugin that exits mid-call leaves the host's connection closing, which
// gRPC reports as cancelled; the caller did not cancel, so it must see a
// retryable unavailable.
func TestRouterCancelledByPluginExitIsUnavailable(t *testing.T) {
	inv := &fakeInvoker{err: &wop.Error{Code: wop.CodeCancelled, Message: "grpc: the client connection is closing"}}
	r := newTestRouter(inv)
	_, err := r.Call(context.Background(), allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1})
	we := wantWopError(t, err, wop.CodeUnavailable, "host.acme.kv.get")
	if !we.Retryable {
		t.Fatalf("error %v is not retryable", err)
	}
}

func TestRouterErrorPassesThrough(t *testing.T) {
	want := &wop.Error{
		Code: "acme.conflict", Message: "version mismatch", Capability: "host.acme.kv.put",
		Retryable: true, Details: json.RawMessage(`{"version":3}`),
	}
	inv := &fakeInvoker{err: want}
	r := newTestRouter(inv)
	out, err := r.Call(context.Background(), allowAll, "acme.kv", "put", []byte(`{}`), wop.CallContext{Depth: 1})
	if out != nil {
		t.Errorf("result = %q, want nil", out)
	}
	if err != want {
		t.Fatalf("error = %#v, want the invoker's error unchanged", err)
	}
	if want.Code != "acme.conflict" || want.Capability != "host.acme.kv.put" || !want.Retryable || string(want.Details) != `{"version":3}` {
		t.Fatalf("invoker's error was modified: %#v", want)
	}

	// A wrapped error is returned as is too.
	wrapped := fmt.Errorf("plugin: %w", want)
	inv.err = wrapped
	if _, err := r.Call(context.Background(), allowAll, "acme.kv", "put", nil, wop.CallContext{Depth: 1}); err != wrapped {
		t.Fatalf("error = %v, want the wrapped error unchanged", err)
	}
}

// The core families' rules, as the router holds calls to them: the
// facet a call needs is read from the decoded request, never its bytes.
func TestCoreRulesFacet(t *testing.T) {
	rules := hostwire.CoreRules()
	tests := []struct{ family, method, payload, want, refused string }{
		{wop.FamilyAIEnvelope, "await", `{}`, "await", ""},
		{wop.FamilyAIEnvelope, "generate", `{"envelopeType":"x"}`, "", ""},
		{wop.FamilyAIEnvelope, "generate", `{"envelopeType":"x","async":false}`, "", ""},
		{wop.FamilyAIEnvelope, "generate", `{"envelopeType":"x","async":true}`, "await", ""},
		{wop.FamilyAIEnvelope, "generate", `{"envelopeType":"x","\u0061sync":true}`, "await", ""},
		{wop.FamilyAIEnvelope, "generate", `{"userMessage":"\"async\": true"}`, "", ""},
		{wop.FamilyAIEnvelope, "generate", `{"Async":true}`, "", `unknown member "Async"`},
		{wop.FamilyAIEnvelope, "generate", `{"async":false,"async":true}`, "", `member "async" appears twice`},
		{wop.FamilyAIEnvelope, "generate", `not json "async"`, "", "malformed JSON"},
		{wop.FamilyMCP, "callTool", `{}`, "client", ""},
		{wop.FamilyMCP, "anything", `{}`, "client", ""},
		{wop.FamilyPromptLibrary, "get", `{}`, "", ""},
		{wop.FamilyAgentRuntime, "spawn", `{"async":true}`, "", ""},
		{"acme.kv", "await", `{"async":true}`, "", ""},
	}
	for _, tt := range tests {
		got, err := rules[tt.family].Facet(tt.method, []byte(tt.payload))
		switch {
		case tt.refused == "" && (err != nil || got != tt.want):
			t.Errorf("%s.%s %s: facet %q, %v; want %q", tt.family, tt.method, tt.payload, got, err, tt.want)
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused) || wop.CodeOf(err) != wop.CodeValidation):
			t.Errorf("%s.%s %s: facet %q, %v; want a validation_error containing %q", tt.family, tt.method, tt.payload, got, err, tt.refused)
		}
	}
}

// The invoker sees the earlier of the caller's context deadline and the
// call's own.
func TestRouterEarlierDeadlineWins(t *testing.T) {
	soon, later := time.Now().Add(time.Minute), time.Now().Add(time.Hour)
	for name, tt := range map[string]struct{ ctxDeadline, callDeadline time.Time }{
		"context earlier": {soon, later},
		"call earlier":    {later, soon},
	} {
		t.Run(name, func(t *testing.T) {
			inv := &fakeInvoker{result: []byte(`1`)}
			r := newTestRouter(inv)
			ctx, cancel := context.WithDeadline(context.Background(), tt.ctxDeadline)
			defer cancel()
			if _, err := r.Call(ctx, allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1, Deadline: tt.callDeadline}); err != nil {
				t.Fatal(err)
			}
			if got := inv.calls[0]; !got.hasDeadline || !got.deadline.Equal(soon) {
				t.Fatalf("invoker deadline = %v (%v), want %v", got.deadline, got.hasDeadline, soon)
			}
		})
	}
}

// A context that ends just after the call's deadline, as the one gRPC
// rebuilds from a timeout does, stands for that deadline: the invoker gets
// it as it is. A call whose deadline has passed is refused all the same.
func TestRouterContextWithinTheSlackStandsForTheDeadline(t *testing.T) {
	t.Run("kept", func(t *testing.T) {
		inv := &fakeInvoker{result: []byte(`1`)}
		r := newTestRouter(inv)
		callDeadline := time.Now().Add(time.Minute)
		ctxDeadline := callDeadline.Add(deadlineSlack / 2)
		ctx, cancel := context.WithDeadline(context.Background(), ctxDeadline)
		defer cancel()
		if _, err := r.Call(ctx, allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1, Deadline: callDeadline}); err != nil {
			t.Fatal(err)
		}
		if got := inv.calls[0]; !got.hasDeadline || !got.deadline.Equal(ctxDeadline) {
			t.Fatalf("invoker deadline = %v (%v), want the context's %v", got.deadline, got.hasDeadline, ctxDeadline)
		}
	})
	t.Run("passed", func(t *testing.T) {
		inv := &fakeInvoker{result: []byte(`1`)}
		r := newTestRouter(inv)
		callDeadline := time.Now().Add(-time.Millisecond)
		ctx, cancel := context.WithDeadline(context.Background(), callDeadline.Add(deadlineSlack))
		defer cancel()
		_, err := r.Call(ctx, allowAll, "acme.kv", "get", nil, wop.CallContext{Depth: 1, Deadline: callDeadline})
		if code := wop.CodeOf(err); code != wop.CodeDeadlineExceeded {
			t.Fatalf("error %v (code %q), want %s", err, code, wop.CodeDeadlineExceeded)
		}
		if len(inv.calls) != 0 {
			t.Fatalf("the invoker got %d calls past the deadline", len(inv.calls))
		}
	})
}

// An async generate needs the await facet like await itself: declared by
// the caller and advertised, checked before the plugin sees the call, so
// no pack starts a job it cannot collect.
func TestRouterAsyncGenerateNeedsTheAwaitFacet(t *testing.T) {
	inv := &fakeInvoker{result: []byte(`1`)}
	r := newTestRouter(inv) // aiEnvelope without the await facet
	async := []byte(`{"async":true}`)
	_, err := r.Call(context.Background(), allowAll, wop.FamilyAIEnvelope, "generate", async, wop.CallContext{Depth: 1})
	wantWopError(t, err, wop.CodeCapabilityNotProvided, "host.aiEnvelope.await")
	noAwait := Caller{Name: "pack:demo", Allowed: func(_, facet string) bool { return facet == "" }}
	_, err = r.Call(context.Background(), noAwait, wop.FamilyAIEnvelope, "generate", async, wop.CallContext{Depth: 1})
	wantWopError(t, err, wop.CodeCapabilityNotDeclared, "host.aiEnvelope.generate")
	if inv.count() != 0 {
		t.Fatalf("the plugin saw %d refused calls", inv.count())
	}
	if _, err := r.Call(context.Background(), noAwait, wop.FamilyAIEnvelope, "generate", []byte(`{"async":false}`), wop.CallContext{Depth: 1}); err != nil {
		t.Fatalf("a synchronous generate: %v", err)
	}
}
