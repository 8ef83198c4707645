package wasm

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestGoGuestRandomIsSeeded: WASI random_get of a Go guest is a function of
// Invocation.Seed alone, and its stdout reaches the pack logger.
func TestGoGuestRandomIsSeeded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go guest")
	}
	var out syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Trace})
	m, err := newEngine(t).Load(context.Background(), goGuest(t), LoadOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if m.PackName() != "go-guest" || m.Encoding() != EncodingPackedI64 {
		t.Fatalf("name %q, encoding %q", m.PackName(), m.Encoding())
	}
	random := func(seed byte) string {
		t.Helper()
		resp, err := m.Invoke(context.Background(), Invocation{TypeID: "random", Seed: [32]byte{seed}})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Output)
	}
	a1, a2, b := random(1), random(1), random(2)
	if a1 != a2 {
		t.Errorf("the same seed gave %s then %s", a1, a2)
	}
	if a1 == b {
		t.Errorf("seeds 1 and 2 both gave %s", a1)
	}
	if n := strings.Count(out.String(), "goguest: invoked"); n != 3 {
		t.Errorf("the pack logger has %d stdout lines of 3:\n%s", n, out.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}
