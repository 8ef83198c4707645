package wasmpack

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/wop"
)

// fakeHost is the host's imports in memory; it records what the node did.
type fakeHost struct {
	now       int64
	vars      map[string][]byte
	chans     map[string][]byte
	status    int32 // what the write imports answer
	logs      []string
	ad        string
	answer    string // wophost_call's answer
	calls     []string
	resume    []byte
	randCalls int
}

func (h *fakeHost) channelRead(name string) ([]byte, bool) { v, ok := h.chans[name]; return v, ok }
func (h *fakeHost) channelWrite(name string, v []byte) int32 {
	if h.status == statusOK {
		h.chans[name] = v
	}
	return h.status
}
func (h *fakeHost) variableGet(key string) ([]byte, bool) { v, ok := h.vars[key]; return v, ok }
func (h *fakeHost) variableSet(key string, v []byte) int32 {
	if h.status == statusOK {
		h.vars[key] = v
	}
	return h.status
}
func (h *fakeHost) interrupt(p []byte) ([]byte, bool) { return h.resume, h.resume != nil }
func (h *fakeHost) log(level int32, msg string) {
	h.logs = append(h.logs, string(rune('0'+level))+" "+msg)
}
func (h *fakeHost) nowMs() int64 { return h.now }
func (h *fakeHost) random(p []byte) {
	h.randCalls++
	for i := range p {
		p[i] = byte(i + 1)
	}
}
func (h *fakeHost) call(family, method string, payload []byte) []byte {
	h.calls = append(h.calls, family+"."+method+" "+string(payload))
	return []byte(h.answer)
}
func (h *fakeHost) advertised() []byte { return []byte(h.ad) }

func newFake() *fakeHost {
	return &fakeHost{now: 1767225600123, vars: map[string][]byte{}, chans: map[string][]byte{}, ad: `{}`}
}

const manifest = `{"name":"community.acme.test","nodes":[{"typeId":"test.echo"},{"typeId":"test.fail"}]}`

// testServer serves echo (its input back, with what the Ctx says) and
// fail (the error of the input's "fail" member).
func testServer(t *testing.T, echo Node) *server {
	t.Helper()
	s, err := newServer(&Pack{Manifest: []byte(manifest), Nodes: map[string]Node{
		"test.echo": echo,
		"test.fail": func(ctx *Ctx, in json.RawMessage) (any, error) {
			switch string(in) {
			case `"wop"`:
				return nil, wop.Errorf("acme.nope", "no way").WithDetails(map[string]int{"n": 1})
			case `"plain"`:
				return nil, errors.New("disk on fire")
			case `"panic"`:
				panic("boom")
			case `"nil"`:
				var we *wop.Error
				return nil, we
			}
			return nil, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func envelope(inputs string) []byte {
	return []byte(`{"abiVersion":1,"nodeContext":{"runId":"run_1","nodeId":"node_2","tenantId":"default","attempt":3,"configurable":{"k":true},"agent":null},"inputs":` + inputs + `}`)
}

type decoded struct {
	Outcome string          `json:"outcome"`
	Output  json.RawMessage `json:"output"`
	Error   *failure        `json:"error"`
}

func invoke(t *testing.T, s *server, index int32, req []byte, h *fakeHost) decoded {
	t.Helper()
	var d decoded
	if err := json.Unmarshal(s.invoke(index, req, h), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The manifest's nodes, in its order, are the node indexes; a pack whose
// manifest and handlers differ, or whose manifest has no name, is refused
// naming the node.
func TestNewServer(t *testing.T) {
	echo := func(*Ctx, json.RawMessage) (any, error) { return nil, nil }
	s := testServer(t, echo)
	if s.name != "community.acme.test" || strings.Join(s.ids, ",") != "test.echo,test.fail" {
		t.Errorf("server %q %q", s.name, s.ids)
	}
	for i, want := range map[int32]string{-1: "", 0: "test.echo", 1: "test.fail", 2: ""} {
		if id, ok := s.nodeID(i); id != want || ok != (want != "") {
			t.Errorf("nodeID(%d) = %q, %v", i, id, ok)
		}
	}
	for _, c := range []struct {
		manifest string
		nodes    map[string]Node
		want     string
	}{
		{`{"nodes":[]}`, nil, "manifest has no name"},
		{`{"name":`, nil, "manifest is not valid JSON"},
		{manifest, map[string]Node{"test.echo": echo}, `manifest node "test.fail" has no handler`},
		{manifest, map[string]Node{"test.echo": echo, "test.fail": nil}, `manifest node "test.fail" has no handler`},
		{manifest, map[string]Node{"test.echo": echo, "test.fail": echo, "test.fai": echo}, `Pack.Nodes has "test.fai"`},
		{`{"name":"a.b.c","nodes":[{"typeId":"x.y"},{"typeId":"x.y"}]}`, map[string]Node{"x.y": echo}, `lists node "x.y" twice`},
		{`{"name":"a.b.c","nodes":[{}]}`, nil, "manifest node 0 has no typeId"},
	} {
		_, err := newServer(&Pack{Manifest: []byte(c.manifest), Nodes: c.nodes})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %d nodes: %v; want %q", c.manifest, len(c.nodes), err, c.want)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "wasmpack: invalid pack: manifest has no name") {
			t.Errorf("Serve of a pack without a name: %v", r)
		}
	}()
	Serve(&Pack{Manifest: []byte(`{}`)})
}

// A node sees the request's run, the host's time and random bytes, its
// variables and channels through the imports, and its output is the
// completed outcome's.
func TestInvokeCompleted(t *testing.T) {
	h := newFake()
	h.vars["seen"] = []byte(`7`)
	h.chans["in"] = []byte(`"hi"`)
	s := testServer(t, TypedNode(func(ctx *Ctx, in *struct {
		Name string `json:"name"`
	}) (map[string]any, error) {
		b := make([]byte, 3)
		ctx.Random(b)
		ctx.Random(nil)
		v, ok := ctx.Variable("seen")
		_, missing := ctx.Variable("see")
		ch, _ := ctx.ReadChannel("in")
		if err := ctx.SetVariable("name", in.Name); err != nil {
			return nil, err
		}
		if err := ctx.WriteChannel("out", []int{1}); err != nil {
			return nil, err
		}
		ctx.Logger.Info("hi there", "name", in.Name, "odd")
		return map[string]any{"run": ctx.Run, "now": ctx.Now().Format(time.RFC3339Nano), "rand": b, "seen": v, "ok": ok, "missing": missing, "ch": ch}, nil
	}))
	d := invoke(t, s, 0, envelope(`{"name":"Ada Lovelace"}`), h)
	want := `{"ch":"hi","missing":false,"now":"2026-01-01T00:00:00.123Z","ok":true,"rand":"AQID","run":{"RunID":"run_1","NodeID":"node_2","TenantID":"default","TypeID":"test.echo","Attempt":3,"Configurable":{"k":true},"Agent":null},"seen":7}`
	if d.Outcome != outcomeCompleted || string(d.Output) != want {
		t.Errorf("outcome %s output %s\nwant %s", d.Outcome, d.Output, want)
	}
	if string(h.vars["name"]) != `"Ada Lovelace"` || string(h.chans["out"]) != `[1]` || h.randCalls != 1 {
		t.Errorf("vars %q chans %q random calls %d", h.vars, h.chans, h.randCalls)
	}
	if len(h.logs) != 1 || h.logs[0] != `2 hi there name="Ada Lovelace" odd=(missing)` {
		t.Errorf("logs %q", h.logs)
	}
}

// Node errors become failed outcomes: a *wop.Error with its code, message
// and details, anything else (a panic too) internal; never a trap.
func TestInvokeFailed(t *testing.T) {
	s := testServer(t, func(*Ctx, json.RawMessage) (any, error) { return func() {}, nil })
	for _, c := range []struct {
		index          int32
		req            []byte
		code, msg, det string
	}{
		{1, envelope(`"wop"`), "acme.nope", "no way", `{"n":1}`},
		{1, envelope(`"plain"`), wop.CodeInternal, "disk on fire", ""},
		{1, envelope(`"panic"`), wop.CodeInternal, "node panicked: boom", ""},
		{1, envelope(`"nil"`), wop.CodeInternal, "nil *wop.Error", ""},
		{0, envelope(`{}`), wop.CodeInternal, "encode output of test.echo", ""},
		{2, envelope(`{}`), wop.CodeNotFound, "no node at index 2 (it has 2)", ""},
		{-1, envelope(`{}`), wop.CodeNotFound, "no node at index -1", ""},
		{1, []byte(`{"nodeContext":{},"inputs":1}`), wop.CodeValidation, "no abiVersion", ""},
		{1, []byte(`{"abiVersion":2,"inputs":1}`), wop.CodeValidation, "abiVersion 2; this pack speaks 1", ""},
		{1, []byte(`{"abiVersion":1,"nodeContext":{"attempt":"one"}}`), wop.CodeValidation, "invalid request envelope", ""},
		{1, nil, wop.CodeValidation, "invalid request envelope", ""},
	} {
		d := invoke(t, s, c.index, c.req, newFake())
		if d.Outcome != outcomeFailed || d.Error == nil || d.Error.Code != c.code || !strings.Contains(d.Error.Message, c.msg) || string(d.Error.Details) != c.det || d.Output != nil {
			t.Errorf("node %d with %s: %+v %+v; want %s %q %s", c.index, c.req, d, d.Error, c.code, c.msg, c.det)
		}
	}
	h := newFake()
	h.ad = `[]`
	if d := invoke(t, s, 1, envelope(`"x"`), h); d.Error == nil || !strings.Contains(d.Error.Message, "advertisement is not an object") {
		t.Errorf("a malformed advertisement: %+v", d)
	}
}

// A node returning nil or raw JSON completes with it; raw bytes that are
// not JSON are internal.
func TestOutputs(t *testing.T) {
	for _, c := range []struct {
		out  any
		want string
	}{{nil, "null"}, {json.RawMessage(nil), "null"}, {json.RawMessage(`{"a": 1}`), `{"a":1}`}, {json.RawMessage(`{"a":`), ""}} {
		s := testServer(t, func(*Ctx, json.RawMessage) (any, error) { return c.out, nil })
		d := invoke(t, s, 0, envelope(`{}`), newFake())
		if c.want == "" {
			if d.Outcome != outcomeFailed || !strings.Contains(d.Error.Message, "not valid JSON") {
				t.Errorf("%s: %+v", c.out, d)
			}
		} else if d.Outcome != outcomeCompleted || string(d.Output) != c.want {
			t.Errorf("%v: %s %s; want %s", c.out, d.Outcome, d.Output, c.want)
		}
	}
}

// A write the host refuses is a *wop.Error with the code its status
// names; an unknown status is a host_error.
func TestStatusErrors(t *testing.T) {
	for status, code := range map[int32]string{1: "channel_access_denied", 2: "channel_schema_breaking_change",
		3: "channel_cross_engine_write_forbidden", 10: "validation_error", 11: "not_found", 20: "capability_breach", 99: "host_error", 42: "host_error"} {
		h := newFake()
		h.status = status
		c := newCtx(t.Context(), h, Run{}, nil)
		for what, err := range map[string]error{"channel": c.WriteChannel("out", 1), "variable": c.SetVariable("k", 1)} {
			if wop.CodeOf(err) != code || !strings.Contains(err.Error(), "status "+strconv.Itoa(int(status))) {
				t.Errorf("%s write with status %d: %v; want %s", what, status, err, code)
			}
		}
		if len(h.vars) != 0 || len(h.chans) != 0 {
			t.Errorf("status %d: written %q %q", status, h.vars, h.chans)
		}
	}
	c := newCtx(t.Context(), newFake(), Run{}, nil)
	if err := c.SetVariable("k", func() {}); wop.CodeOf(err) != wop.CodeValidation || !strings.Contains(err.Error(), `variable "k"`) {
		t.Errorf("an unmarshallable value: %v", err)
	}
}

// Host-service calls go through wophost_call: a result decodes into res,
// an error answer is the host's *wop.Error, a malformed answer internal.
// Family clients exist only for advertised families.
func TestCall(t *testing.T) {
	h := newFake()
	h.ad = `{"aiEnvelope":null,"acme.kv":{"x":1}}`
	h.answer = `{"result":{"status":"completed","text":"hello"}}`
	s := testServer(t, func(ctx *Ctx, _ json.RawMessage) (any, error) {
		if ctx.PromptLibrary != nil || ctx.MCP != nil || ctx.AgentRuntime != nil || ctx.AIEnvelope.HasAwait() {
			t.Error("a family client for a family not advertised")
		}
		if f, ok := ctx.Facet("acme.kv", "x"); !ok || string(f) != "1" || !ctx.Advertised("aiEnvelope") || ctx.Advertised("mcp") {
			t.Error("advertisement misread")
		}
		return ctx.AIEnvelope.Generate(ctx, &aienvelope.GenerateRequest{EnvelopeType: "t", IdempotencyKey: "k"})
	})
	if d := invoke(t, s, 0, envelope(`{}`), h); d.Outcome != outcomeCompleted || !strings.Contains(string(d.Output), `"text":"hello"`) {
		t.Errorf("generate: %+v", d)
	}
	if len(h.calls) != 1 || h.calls[0] != `aiEnvelope.generate {"envelopeType":"t","idempotencyKey":"k"}` {
		t.Errorf("calls %q", h.calls)
	}

	c := newCtx(t.Context(), h, Run{}, nil)
	for answer, want := range map[string]string{
		`{"error":{"code":"acme.kv.missing","message":"gone","retryable":true}}`: "acme.kv.missing: gone",
		`{"error":{"message":"gone"}}`:                                           "internal: acme.kv.get: the host's error has no code",
		`{"result":1,"error":{"code":"x","message":"m"}}`:                        "both a result and an error",
		`{}`:                 "neither a result nor an error",
		`not json`:           "not a call answer",
		`{"result":"text"}`:  "the result does not decode",
		`{"result":{"n":2}}`: "",
	} {
		h.answer = answer
		var res struct{ N int }
		err := c.Call("acme.kv", "get", map[string]string{"key": "a"}, &res)
		if want == "" {
			if err != nil || res.N != 2 {
				t.Errorf("%s: %v, %+v", answer, err, res)
			}
		} else if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", answer, err, want)
		}
	}
	h.answer = `{"error":{"code":"acme.kv.busy","message":"later","retryable":true}}`
	var we *wop.Error
	if err := c.Call("acme.kv", "get", nil, nil); !errors.As(err, &we) || !we.Retryable {
		t.Errorf("the host's error loses its flag: %v", err)
	}
	h.answer = `{"result":null}`
	if err := c.Call("acme.kv", "put", nil, nil); err != nil {
		t.Errorf("a null result: %v", err)
	}
	if err := c.Call("acme.kv", "put", func() {}, nil); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("an unmarshallable request: %v", err)
	}
}

// Interrupt returns the resume value, and fails when the host gives none.
func TestInterrupt(t *testing.T) {
	h := newFake()
	c := newCtx(t.Context(), h, Run{}, nil)
	if _, err := c.Interrupt(map[string]string{"kind": "approval"}); wop.CodeOf(err) != wop.CodeInternal {
		t.Errorf("no resume value: %v", err)
	}
	h.resume = []byte(`{"approved":true}`)
	if v, err := c.Interrupt(map[string]string{"kind": "approval"}); err != nil || string(v) != `{"approved":true}` {
		t.Errorf("resume: %s, %v", v, err)
	}
}

// Buffers handed out stay held until freed; the host's buffers are taken
// once, within their length; pairs pack the pointer low.
func TestAllocator(t *testing.T) {
	next := uint32(0)
	a := newAllocator(func([]byte) uint32 { next += 16; return next })
	if p := a.alloc(-1); p != 0 || len(a.bufs) != 0 {
		t.Errorf("alloc(-1) = %d, %d held", p, len(a.bufs))
	}
	zero := a.alloc(0)
	p := a.alloc(5)
	if zero == 0 || p == 0 || zero == p || len(a.bufs) != 2 {
		t.Fatalf("alloc: %d %d, %d held", zero, p, len(a.bufs))
	}
	copy(a.bufs[p], "hello")
	if _, ok := a.take(p, 6); ok {
		t.Error("take past the buffer's end")
	}
	if b, ok := a.take(p, 5); !ok || string(b) != "hello" {
		t.Errorf("take = %q, %v", b, ok)
	}
	if _, ok := a.take(p, 5); ok {
		t.Error("a buffer taken twice")
	}
	a.free(zero)
	a.free(zero)
	if len(a.bufs) != 0 {
		t.Errorf("%d held after free", len(a.bufs))
	}
	r := a.result([]byte("abc"))
	ptr, n := unpair(r)
	if n != 3 || string(a.bufs[ptr]) != "abc" || r != uint64(3)<<32|uint64(ptr) {
		t.Errorf("result %#x: %d bytes at %d", r, n, ptr)
	}
	if _, ok := a.bufs[unpairPtr(a.result(nil))]; !ok {
		t.Error("an empty result is not held")
	}
}

func unpairPtr(p uint64) uint32 { ptr, _ := unpair(p); return ptr }

// The family clients and this package build for wasip1 without gRPC or
// go-plugin: a WebAssembly pack links sdk/wop and the clients alone.
func TestWasip1Deps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{"./", "../families/aienvelope", "../families/promptlibrary", "../families/mcp", "../families/agentruntime"} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Env = append(cmd.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 5 {
			t.Fatalf("go list -deps %s listed %q", pkg, deps)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "google.golang.org/grpc") || strings.HasPrefix(d, "github.com/hashicorp/go-plugin") ||
				strings.HasPrefix(d, "google.golang.org/protobuf") || strings.HasPrefix(d, "github.com/hashicorp/go-hclog") {
				t.Errorf("%s depends on %s for wasip1", pkg, d)
			}
		}
	}
}
