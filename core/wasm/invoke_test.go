package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

func invoke(t *testing.T, m *Module, typeID string, imports Imports) (*Response, error) {
	t.Helper()
	return m.Invoke(context.Background(), Invocation{TypeID: typeID, Imports: imports})
}

// TestBothEncodingsGiveTheSameOutput: echo answers the request envelope it
// was handed, the same through multi-value and packed-i64 pairs.
func TestBothEncodingsGiveTheSameOutput(t *testing.T) {
	req := Request{RunID: "run_1", NodeID: "node_1", TenantID: "default", Attempt: 2, Inputs: json.RawMessage(`{"a":[1,2]}`)}
	want := `{"abiVersion":1,"nodeContext":{"runId":"run_1","nodeId":"node_1","tenantId":"default","attempt":2,` +
		`"configurable":{},"agent":null},"inputs":{"a":[1,2]}}`
	for _, name := range []string{"good_multi", "good_packed"} {
		m := load(t, name, LoadOptions{})
		resp, err := m.Invoke(context.Background(), Invocation{TypeID: "echo", Request: req})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.Outcome != OutcomeCompleted || string(resp.Output) != want {
			t.Errorf("%s: %s %s\nwant %s", name, resp.Outcome, resp.Output, want)
		}
	}
}

func TestInvokeRefusesBadRequests(t *testing.T) {
	m := load(t, "good_multi", LoadOptions{})
	for _, id := range []string{"ech", "echo2", "Echo", ""} {
		if _, err := invoke(t, m, id, nil); !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
			t.Errorf("%q: %v", id, err)
		}
	}
	for field, req := range map[string]Request{
		"Inputs":       {Inputs: json.RawMessage(`{"a":`)},
		"Configurable": {Configurable: json.RawMessage(`nope`)},
		"Agent":        {Agent: json.RawMessage(`{`)},
	} {
		_, err := m.Invoke(context.Background(), Invocation{TypeID: "echo", Request: req})
		if err == nil || !strings.Contains(err.Error(), "request."+field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// TestMemoryCap: the bomb's refused grow is reported with the size it asked
// for, whatever the module did after (it traps); a cap of exactly the
// second size lets that grow through and refuses the next.
func TestMemoryCap(t *testing.T) {
	for _, c := range []struct {
		limit, observed int64
	}{
		{8 << 20, (16 + 1024) * pageSize},
		{DefaultMaxMemoryBytes, (16 + 1024 + 1024) * pageSize},
		{(16 + 1024 + 1024) * pageSize, (16 + 1024 + 1024 + 1024) * pageSize},
	} {
		var opts LoadOptions
		if c.limit != DefaultMaxMemoryBytes {
			opts.MaxMemoryBytes = c.limit
		}
		m := load(t, "membomb", opts)
		_, err := invoke(t, m, "echo", nil)
		var breach *CapBreach
		if !errors.As(err, &breach) || *breach != (CapBreach{BreachMemory, c.limit, c.observed}) {
			// Fatal: with the cap loosened, the next cases would grow far.
			t.Fatalf("cap %d: %v, want observed %d", c.limit, err, c.observed)
		}
		// The breach killed one instance only.
		resp, err := invoke(t, m, "counter", nil)
		if err != nil || string(resp.Output) != `{"count":1}` {
			t.Errorf("cap %d: after the breach: %v %v", c.limit, resp, err)
		}
	}
}

// TestExecutionCap: a loop ends with the execution cap, soon; time the host
// spends in an import does not count.
func TestExecutionCap(t *testing.T) {
	m := load(t, "loop", LoadOptions{Limits: Limits{MaxExecution: 200 * time.Millisecond}})
	start := time.Now()
	_, err := invoke(t, m, "spin", newFakeImports())
	var breach *CapBreach
	if !errors.As(err, &breach) || breach.Kind != BreachExecutionTime || breach.Limit != 200 || breach.Observed < 200 {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the loop was stopped after %s", took)
	}
	slow := newFakeImports()
	slow.nowSleep = 400 * time.Millisecond
	resp, err := invoke(t, m, "nowcall", slow)
	if err != nil || string(resp.Output) != `{"count":1}` {
		t.Errorf("a 400ms import under a 200ms cap: %v %v", resp, err)
	}
}

// TestCallerDeadline: the caller's deadline is reported as such, not as a
// cap breach.
func TestCallerDeadline(t *testing.T) {
	m := load(t, "loop", LoadOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := m.Invoke(ctx, Invocation{TypeID: "spin"})
	var breach *CapBreach
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &breach) {
		t.Errorf("got %v", err)
	}
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := m.Invoke(cancelled, Invocation{TypeID: "spin"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestTraps(t *testing.T) {
	m := load(t, "trap", LoadOptions{})
	for id, want := range map[string]string{"trap": "unreachable", "overrun": "out of bounds memory access"} {
		_, err := invoke(t, m, id, nil)
		var trap *Trap
		if !errors.As(err, &trap) || !strings.Contains(trap.Message, want) || strings.Contains(trap.Message, "\n") {
			t.Errorf("%s: %v", id, err)
		}
	}
}

func TestEnvelopes(t *testing.T) {
	m := load(t, "badresp", LoadOptions{})
	bad := map[string]string{
		"not-json":        "not a JSON object",
		"unknown-outcome": `outcome: "exploded" is not one of completed, suspended, failed`,
		"no-output":       "output: missing",
		"failed-no-code":  "error.code: missing",
		"no-interrupt":    "interrupt:",
		"out-of-bounds":   "(ptr 262138, len 100) runs past the end of memory (262144 bytes)",
		"oversize":        "16777217 bytes, above the bound of 16777216",
		"at-limit":        "not a JSON object",
	}
	for id, want := range bad {
		_, err := invoke(t, m, id, nil)
		var ee *EnvelopeError
		if !errors.As(err, &ee) || !strings.Contains(ee.Problem, want) {
			t.Errorf("%s: %v, want %q", id, err, want)
		}
	}
	resp, err := invoke(t, m, "failed", nil)
	if err != nil || resp.Outcome != OutcomeFailed || resp.Error.Code != "bad_input" || resp.Error.Message != "no" ||
		string(resp.Error.Details) != `{"field":"x"}` {
		t.Errorf("failed: %+v %v", resp, err)
	}
	resp, err = invoke(t, m, "suspended", nil)
	if err != nil || resp.Outcome != OutcomeSuspended || string(resp.Interrupt) != `{"kind":"approval"}` {
		t.Errorf("suspended: %+v %v", resp, err)
	}
}

// TestImportsAnswered: every openwop import reaches Imports and the module
// sees exactly what it answered.
func TestImportsAnswered(t *testing.T) {
	m := load(t, "imports", LoadOptions{})
	f := newFakeImports()
	f.channels["in"] = []byte(`{"c":true}`)
	f.vars["k"] = []byte(`"kv"`)
	f.status = StatusChannelAccessDenied
	f.now = 1767225600123
	f.random = []byte{0xde, 0xad, 0xbe, 0xef}
	f.resume = []byte(`{"approved":true}`)
	resp, err := invoke(t, m, "all", f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"channel":{"c":true},"variable":"kv","writeStatus":1,"setStatus":1,"now":1767225600123,` +
		`"random":"deadbeefdeadbeef","resume":{"approved":true}}`
	if string(resp.Output) != want {
		t.Errorf("output %s\nwant   %s", resp.Output, want)
	}
	if string(f.writes["out"]) != "42" || string(f.sets["k2"]) != `"v"` || len(f.payloads) != 1 ||
		string(f.payloads[0]) != `{"ask":1}` || len(f.logs) != 1 || f.logs[0] != "**hello from wat" {
		t.Errorf("the host was told writes %q sets %q payloads %q logs %q", f.writes, f.sets, f.payloads, f.logs)
	}

	// Misses are (0, 0), which the module answers as null.
	miss := newFakeImports()
	miss.resume = []byte(`1`)
	resp, err = invoke(t, m, "all", miss)
	if err != nil || !strings.HasPrefix(string(resp.Output), `{"channel":null,"variable":null,"writeStatus":0,`) {
		t.Errorf("misses: %v %v", resp, err)
	}
}

// TestImportArgumentsAreChecked: a name past the end of memory, or one byte
// above the bound, traps before the host is asked.
func TestImportArgumentsAreChecked(t *testing.T) {
	m := load(t, "bad_args", LoadOptions{})
	for id, want := range map[string]string{
		"past":    "channel name (ptr 65530, len 100) runs past the end of memory (65536 bytes)",
		"too-big": fmt.Sprintf("channel name of %d bytes, above the bound of %d", MaxNameBytes+1, MaxNameBytes),
	} {
		f := newFakeImports()
		f.readErr = errors.New("the host was asked")
		_, err := invoke(t, m, id, f)
		var trap *Trap
		if !errors.As(err, &trap) || trap.Message != "openwop_channel_read: "+want {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// TestImportErrorAborts: an import's error ends the invocation and is what
// Invoke returns.
func TestImportErrorAborts(t *testing.T) {
	m := load(t, "imports", LoadOptions{})
	type hostFault struct{ error }
	f := newFakeImports()
	f.readErr = hostFault{errors.New("store down")}
	_, err := invoke(t, m, "all", f)
	var hf hostFault
	if !errors.As(err, &hf) {
		t.Fatalf("got %v", err)
	}
	if len(f.writes) != 0 {
		t.Errorf("the module went on after the abort: writes %q", f.writes)
	}
	// Without Imports the invocation stops at the first import.
	if _, err := invoke(t, m, "all", nil); err == nil || !strings.Contains(err.Error(), "openwop_channel_read") {
		t.Errorf("no imports: %v", err)
	}
}

// TestExtension: wophost_call answers {"result": …} or the refusal as
// {"error": …}; wophost_advertised answers the advertisement.
func TestExtension(t *testing.T) {
	m := load(t, "ext", LoadOptions{})
	f := newFakeImports()
	f.callRes = []byte(`{"text":"hello"}`)
	f.adv = []byte(`{"aiEnvelope":{"generate":{}}}`)
	resp, err := invoke(t, m, "call", f)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"call":{"result":{"text":"hello"}},"advertised":{"aiEnvelope":{"generate":{}}}}`; string(resp.Output) != want {
		t.Errorf("output %s\nwant   %s", resp.Output, want)
	}
	if len(f.calls) != 1 || f.calls[0] != `aiEnvelope.generate {"prompt":"hi"}` {
		t.Errorf("calls %q", f.calls)
	}
	f.callErr = fmt.Errorf("gate: %w", &wop.Error{Code: wop.CodeCapabilityNotDeclared, Message: "no", Capability: "ai"})
	resp, err = invoke(t, m, "call", f)
	if err != nil {
		t.Fatalf("a refused call aborted the invocation: %v", err)
	}
	var out struct {
		Call struct {
			Error wop.Error `json:"error"`
		} `json:"call"`
	}
	if err := json.Unmarshal(resp.Output, &out); err != nil || out.Call.Error.Code != wop.CodeCapabilityNotDeclared ||
		out.Call.Error.Capability != "ai" {
		t.Errorf("refusal answered as %s (%v)", resp.Output, err)
	}
}

// TestWarmPoolGivesFreshInstances: the counter is 1 on every invocation,
// whether the instance came from the pool or not.
func TestWarmPoolGivesFreshInstances(t *testing.T) {
	for _, warm := range []int{0, 2} {
		m := load(t, "good_multi", LoadOptions{WarmInstances: warm})
		for i := range 6 {
			resp, err := invoke(t, m, "counter", nil)
			if err != nil || string(resp.Output) != `{"count":1}` {
				t.Fatalf("warm %d, invocation %d: %v %v", warm, i, resp, err)
			}
		}
	}
}

// TestInstancesAreClosed: every invocation closes its instance, whatever
// its outcome; only the warm ones stay open.
func TestInstancesAreClosed(t *testing.T) {
	for _, warm := range []int64{0, 2} {
		m := load(t, "trap", LoadOptions{WarmInstances: int(warm)})
		for _, id := range []string{"trap", "overrun", "trap"} {
			if _, err := invoke(t, m, id, nil); err == nil {
				t.Fatalf("%s did not trap", id)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for m.open.Load() != warm && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := m.open.Load(); n != warm {
			t.Errorf("warm %d: %d instances open after the invocations", warm, n)
		}
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := m.open.Load(); n != 0 {
			t.Errorf("warm %d: %d instances open after Close", warm, n)
		}
	}
}

// TestWarmPoolIsUsed: with a pool, invocations take instances made ahead.
func TestWarmPoolIsUsed(t *testing.T) {
	m := load(t, "good_multi", LoadOptions{WarmInstances: 1})
	deadline := time.Now().Add(5 * time.Second)
	for len(m.pool.ready) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	inst := m.pool.take()
	if inst == nil {
		t.Fatal("the pool made no instance")
	}
	inst.close(context.Background())
	for len(m.pool.ready) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(m.pool.ready) != 1 {
		t.Fatal("the pool was not refilled after a take")
	}
}

func TestConcurrentInvokes(t *testing.T) {
	m := load(t, "imports", LoadOptions{WarmInstances: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				f := newFakeImports()
				f.now = int64(g*100 + i)
				f.resume = []byte(`0`)
				resp, err := m.Invoke(context.Background(), Invocation{TypeID: "all", Imports: f})
				if err != nil {
					errs <- err
					continue
				}
				if !strings.Contains(string(resp.Output), fmt.Sprintf(`"now":%d,`, g*100+i)) {
					errs <- fmt.Errorf("goroutine %d got %s", g, resp.Output)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A value that is not JSON, handed to a write import, is answered
// validation_error (10) and never reaches the host; the module goes on.
func TestWriteOfNoJSONIsAValidationStatus(t *testing.T) {
	m := load(t, "badwrite", LoadOptions{})
	f := newFakeImports()
	resp, err := invoke(t, m, "write", f)
	if err != nil {
		t.Fatal(err)
	}
	// '0' + 10 is ':'.
	if string(resp.Output) != `{"statuses":"::"}` {
		t.Errorf("output %s, want both statuses 10", resp.Output)
	}
	if len(f.writes) != 0 || len(f.sets) != 0 {
		t.Errorf("the host was handed %v and %v", f.writes, f.sets)
	}
}
