package direct

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// sized answers a call whose method is a number with a JSON string of
// that many bytes, counting the calls it ran.
func sized(ran *atomic.Int32) Handler {
	return func(_ context.Context, _, method string, _ []byte, _ wop.CallContext) ([]byte, error) {
		ran.Add(1)
		n, _ := strconv.Atoi(method)
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		b[0], b[n-1] = '"', '"'
		return b, nil
	}
}

// resultFrameBytes is the length of the answer frame of a result of n
// bytes.
func resultFrameBytes(n int) int64 {
	return int64(headerBytes + proto.Size(&wophostv1.DirectChannelInvokeResponse{Result: make([]byte, n)}))
}

// silentCaller is a connection of the test's own to f's endpoint, which
// reads nothing until the test says so.
func silentCaller(t *testing.T, f *fixture) *tls.Conn {
	t.Helper()
	raw, err := net.Dial("unix", f.at.GetAddress())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	roots := x509.NewCertPool()
	cert, err := x509.ParseCertificate(f.at.GetCertificate())
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(cert)
	tc := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{ALPN}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	return tc
}

// waitUnread waits until the endpoint holds, for the fixture's pack,
// unread bytes other than not.
func waitUnread(t *testing.T, e *Endpoint, not int64) int64 {
	t.Helper()
	return waitPackUnread(t, e, "acme.pack", not)
}

// waitPackUnread waits until the endpoint holds, for pack, unread bytes
// other than not.
func waitPackUnread(t *testing.T, e *Endpoint, pack string, not int64) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n := e.Unread(pack); n != not {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the endpoint's unread bytes stayed %d", not)
	return 0
}

// An answer that would pass the bound of unread answer bytes is dropped
// and the call answered upstream_unavailable; one that reaches the bound
// exactly is held.
func TestUnreadAnswersAreBounded(t *testing.T) {
	const big, small = 4 << 20, 1000
	first, second := resultFrameBytes(big), resultFrameBytes(small)
	for _, tc := range []struct {
		name    string
		bound   int64
		refused bool
		// apart sends the second call on a connection of its own: the
		// pack's bound holds across its connections.
		apart bool
		// otherPack makes the second call another pack's: the
		// connection's bound holds whoever's calls it carries.
		otherPack bool
	}{
		{"at the bound", first + second, false, false, false},
		{"the bound plus one", first + second - 1, true, false, false},
		{"at the bound, on two connections", first + second, false, true, false},
		{"the bound plus one, on two connections", first + second - 1, true, true, false},
		{"the bound plus one, another pack's call", first + second - 1, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran atomic.Int32
			f := &fixture{t: t, ep: NewEndpoint(sized(&ran), 8<<20), key: NewKey(), pool: NewPool(8 << 20)}
			at, err := f.ep.Open(&wophostv1.DirectChannelSettings{GrantKey: f.key, SocketDir: t.TempDir(), Rules: RulesToProto(testRules()), MaxUnreadBytes: tc.bound})
			if err != nil {
				t.Fatal(err)
			}
			f.at = at
			t.Cleanup(func() { f.pool.Close(); f.ep.Close() })
			g := grant()
			g.MaxBytes, g.Log = 0, false
			signed := f.sign(g)
			g.Pack = "other.pack"
			other := f.sign(g)
			conns := []*tls.Conn{silentCaller(t, f)}
			if tc.apart {
				conns = append(conns, silentCaller(t, f))
			}
			call := func(id uint64, n int) {
				grant := signed
				if id == 2 && tc.otherPack {
					grant = other
				}
				body := mustMarshal(t, &wophostv1.DirectChannelInvokeRequest{Family: "acme.kv", Method: strconv.Itoa(n), Payload: []byte(`{}`), Grant: grant})
				if _, err := conns[int(id-1)%len(conns)].Write(encodeFrame(kindCall, id, body)); err != nil {
					t.Fatal(err)
				}
			}
			// The first answer is more than the socket takes unread: it
			// is held, its write waiting for the caller.
			call(1, big)
			if got := waitUnread(t, f.ep, 0); got != first {
				t.Fatalf("held %d bytes, want the first answer's %d", got, first)
			}
			call(2, small)
			if !tc.apart && !tc.otherPack {
				// On a connection of its own the second answer is written
				// at once, and held for no time worth waiting for.
				held := waitUnread(t, f.ep, first)
				if tc.refused != (held != first+second) {
					t.Fatalf("held %d bytes after the second answer (first %d, second %d, bound %d)", held, first, second, tc.bound)
				}
			}
			if tc.otherPack {
				// The other pack's answer, whichever it is, waits behind
				// the first: reading before it is decided would let the
				// first go and leave nothing to pass the bound.
				waitPackUnread(t, f.ep, "other.pack", 0)
			}
			// The caller reads at last: the first answer whole, then the
			// second's or the refusal.
			answers := map[uint64]frame{}
			// The second connection first: reading the first lets its
			// answer go, which the second's must find held.
			slices.Reverse(conns)
			for _, c := range conns {
				r := bufio.NewReader(c)
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				for want := 2 / len(conns); want > 0; want-- {
					fr, err := readFrame(r, 8<<20)
					if err != nil {
						t.Fatal(err)
					}
					answers[fr.id] = fr
				}
			}
			if a := answers[1]; a.kind != kindResult || int64(headerBytes+len(a.body)) != first {
				t.Fatalf("first answer: kind %d, %d bytes", a.kind, len(a.body))
			}
			out, err := outcome(answers[2])
			if tc.refused {
				we, _ := err.(*wop.Error)
				if we == nil || we.Code != wop.CodeUpstreamUnavailable || we.Capability != "host.acme.kv.1000" ||
					!strings.Contains(we.Message, "bound is "+strconv.FormatInt(tc.bound, 10)) || !strings.Contains(we.Message, "direct_max_unread_bytes") {
					t.Fatalf("second answer: %v, %v; want upstream_unavailable naming the bound", out, err)
				}
			} else if err != nil || len(out) != small {
				t.Fatalf("second answer: %d bytes, %v", len(out), err)
			}
			if ran.Load() != 2 {
				t.Errorf("%d calls ran, want 2", ran.Load())
			}
			deadline := time.Now().Add(30 * time.Second)
			for f.ep.Unread("acme.pack") != 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := f.ep.Unread("acme.pack"); n != 0 {
				t.Errorf("%d bytes still counted unread once written", n)
			}
		})
	}
}

// A caller that stops reading makes the plugin hold at most the bound of
// unread answer bytes (beside the kernel's socket buffers); once the
// connection ends they are handed back. The figures go to the test's
// log; with WOPHOST_MEASURE_UNREAD=1 the test sends 40 calls of 4 MiB and
// measures the same without a bound too, as the plugin held them before
// it had one:
//
//	WOPHOST_MEASURE_UNREAD=1 go test -v -run TestUnreadMemory ./internal/direct
func TestUnreadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of MiB")
	}
	measureAll := os.Getenv("WOPHOST_MEASURE_UNREAD") == "1"
	calls, size := 12, 2<<20
	if measureAll {
		calls, size = 40, 4<<20
	}
	const maxBytes = 8 << 20
	measure := func(t *testing.T, bound int64) (held, during, after uint64) {
		var ran atomic.Int32
		f := &fixture{t: t, ep: NewEndpoint(sized(&ran), maxBytes), key: NewKey(), pool: NewPool(maxBytes)}
		at, err := f.ep.Open(&wophostv1.DirectChannelSettings{GrantKey: f.key, SocketDir: t.TempDir(), Rules: RulesToProto(testRules()), MaxUnreadBytes: bound})
		if err != nil {
			t.Fatal(err)
		}
		f.at = at
		// The test ends the connection itself once it has measured.
		f.ep.writeTimeout = time.Minute
		t.Cleanup(func() { f.pool.Close(); f.ep.Close() })
		g := grant()
		g.MaxBytes, g.Log = 0, false
		signed := f.sign(g)
		base := heapInUse()
		baseRetained := retained()
		tc := silentCaller(t, f)
		body := mustMarshal(t, &wophostv1.DirectChannelInvokeRequest{Family: "acme.kv", Method: strconv.Itoa(size), Payload: []byte(`{}`), Grant: signed})
		go func() {
			for i := range calls {
				if _, err := tc.Write(encodeFrame(kindCall, uint64(i+1), body)); err != nil {
					return
				}
			}
		}()
		// Until the count settles: every call ran, or the endpoint
		// stopped reading them.
		last, still := int64(-1), 0
		settle := time.Now().Add(time.Minute)
		for still < 20 && time.Now().Before(settle) {
			time.Sleep(25 * time.Millisecond)
			if n := f.ep.Unread("acme.pack"); n == last && n > 0 {
				still++
			} else {
				last, still = n, 0
			}
		}
		t.Logf("%d calls ran, %d unread now", ran.Load(), f.ep.Unread("acme.pack"))
		during = heapInUse()
		// The caller goes away; the answers held for it are let go.
		_ = tc.NetConn().Close()
		deadline := time.Now().Add(time.Minute)
		for f.ep.Unread("acme.pack") != 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := f.ep.Unread("acme.pack"); n != 0 {
			t.Fatalf("%d unread bytes still counted after the connection ended", n)
		}
		// What the process keeps of the system's memory, as the plugin
		// left it (no collection forced here): the endpoint hands it back
		// itself once the connection's answers are let go.
		for range 40 {
			if after = retained() - min(baseRetained, retained()); after <= maxBytes {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return uint64(last), during - min(base, during), after
	}
	bound := defaultMaxUnread(maxBytes)
	held, during, after := measure(t, bound)
	t.Logf("bound %d MiB: %d MiB held unread, heap %+d MiB while held, %+d MiB kept from the system after", bound>>20, held>>20, during>>20, after>>20)
	if int64(held) > bound {
		t.Errorf("held %d unread bytes, over the bound %d", held, bound)
	}
	if during > uint64(bound)+2*maxBytes {
		t.Errorf("the heap grew by %d MiB while the caller did not read, over the bound of %d MiB and a few answers", during>>20, bound>>20)
	}
	if after > maxBytes {
		t.Errorf("the process kept %d MiB more of the system's memory than at its start after the connection ended", after>>20)
	}
	if !measureAll {
		return
	}
	heldUnbounded, duringUnbounded, afterUnbounded := measure(t, 1<<40)
	t.Logf("no bound: %d MiB held unread, heap %+d MiB while held, %+d MiB kept from the system after", heldUnbounded>>20, duringUnbounded>>20, afterUnbounded>>20)
}

// heapInUse is the heap in use after a collection, the freed memory
// handed back to the system.
func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// retained is the heap memory the process holds of the system's.
func retained() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapSys - m.HeapReleased
}
