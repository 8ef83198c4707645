package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
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

// A legacy server's requests to the client count against MaxRounds like
// input rounds: one that asks for an elicitation again and again has
// MaxRounds answered, is refused the next, and the call fails with
// ErrRoundsExhausted instead of running until the server gives up.
func TestLegacyServerRequestsCountAgainstMaxRounds(t *testing.T) {
	run := func(t *testing.T, opts Options) {
		opts.MaxRounds = 3
		opts.Inputs = &answerer{}
		c := newClient(t, opts)
		_, err := c.CallTool(ctx(t), "elicit_loop", json.RawMessage(`{}`))
		var te *TransportError
		if !errors.As(err, &te) || !errors.Is(err, ErrRoundsExhausted) {
			t.Fatalf("looping server: %v, want a TransportError for exhausted rounds", err)
		}
		var count struct {
			StructuredContent struct {
				Answered int    `json:"answered"`
				Ended    bool   `json:"ended"`
				Why      string `json:"why"`
			} `json:"structuredContent"`
		}
		deadline := time.Now().Add(10 * time.Second)
		for !count.StructuredContent.Ended && time.Now().Before(deadline) {
			res, err := c.CallTool(ctx(t), "loop_count", json.RawMessage(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(res, &count); err != nil {
				t.Fatal(err)
			}
		}
		if c := count.StructuredContent; !c.Ended || c.Answered != 3 {
			t.Errorf("server loop: %+v, want it ended after 3 answers", c)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		run(t, Options{Stdio: stdio(serverBinary(t, gosdkPkg), "-legacy")})
	})
	t.Run("http", func(t *testing.T) {
		run(t, Options{HTTP: &HTTPOptions{URL: startGoSDKHTTP(t, "-legacy")}})
	})
}

// On stdio a server request names no call: it is charged to the waiting
// request with the fewest so far, the oldest among equals, and the one it
// takes past the limit is cut. ping is never charged.
func TestServerRequestsChargedToFewestRounds(t *testing.T) {
	tr := &stdioTransport{maxRounds: 2}
	p := &process{pending: map[string]*waiter{}}
	if w, cut := tr.charge(p, "elicitation/create"); w != nil || cut {
		t.Errorf("nothing waiting: charged %v, cut %v", w, cut)
	}
	for _, id := range []int64{7, 3} {
		key := strconv.FormatInt(id, 10)
		p.pending[key] = &waiter{id: id, key: key, cut: make(chan struct{})}
	}
	var got []int64
	for i := 0; i < 4; i++ {
		w, cut := tr.charge(p, "elicitation/create")
		if cut {
			t.Fatalf("charge %d cut request %d", i, w.id)
		}
		got = append(got, w.id)
	}
	if fmt.Sprint(got) != "[3 7 3 7]" {
		t.Errorf("charged %v, want the fewest first, the oldest among equals", got)
	}
	if w, _ := tr.charge(p, "ping"); w != nil {
		t.Errorf("ping charged to %d", w.id)
	}
	w, cut := tr.charge(p, "sampling/createMessage")
	if !cut || w.id != 3 || p.pending["3"] != nil {
		t.Fatalf("past the limit: %v %v, want request 3 cut and no longer pending", w, cut)
	}
	select {
	case <-w.cut:
	default:
		t.Error("the cut request was not told")
	}
	if w, cut := tr.charge(p, "roots/list"); !cut || w.id != 7 {
		t.Errorf("next: %v %v, want request 7 cut", w, cut)
	}
}
