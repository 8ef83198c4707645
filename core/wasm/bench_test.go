package wasm

import (
	"context"
	"testing"
	"time"
)

// BenchmarkInvokeWATWarm: an invocation of a small WAT pack on an instance
// the pool made ahead (the timer stops while the pool refills).
func BenchmarkInvokeWATWarm(b *testing.B) {
	benchInvoke(b, fixture(b, "good_multi"), "counter", 1)
}

// BenchmarkInvokeWATCold: the same, instantiating in the call.
func BenchmarkInvokeWATCold(b *testing.B) {
	benchInvoke(b, fixture(b, "good_multi"), "counter", 0)
}

// BenchmarkInvokeGoWarm: an invocation of the Go guest (its _initialize,
// the Go runtime's start, already run by the pool).
func BenchmarkInvokeGoWarm(b *testing.B) {
	benchInvoke(b, goGuest(b), "random", 1)
}

// BenchmarkInvokeGoCold: the same, instantiating (and starting the Go
// runtime) in the call.
func BenchmarkInvokeGoCold(b *testing.B) {
	benchInvoke(b, goGuest(b), "random", 0)
}

// benchInvoke reports the time of one invocation and, as
// "linear-bytes/instance", the linear memory of a fresh instance.
func benchInvoke(b *testing.B, wasm []byte, typeID string, warm int) {
	m, err := newEngine(b).Load(context.Background(), wasm, LoadOptions{WarmInstances: warm})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	inst, err := m.instantiate(withState(context.Background(), &callState{budget: stoppedBudget()}))
	if err != nil {
		b.Fatal(err)
	}
	linear := inst.mod.Memory().Size()
	inst.close(context.Background())
	ctx := context.Background()
	for b.Loop() {
		if warm > 0 {
			b.StopTimer()
			for len(m.pool.ready) < warm {
				time.Sleep(10 * time.Microsecond)
			}
			b.StartTimer()
		}
		if _, err := m.Invoke(ctx, Invocation{TypeID: typeID, Imports: newFakeImports()}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(linear), "linear-bytes/instance")
}

// stoppedBudget is a budget that never ends its context, for an instance
// made outside a run.
func stoppedBudget() *budget {
	_, b := startBudget(context.Background(), time.Hour)
	b.stop()
	return b
}
