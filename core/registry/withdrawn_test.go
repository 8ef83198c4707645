package registry

import (
	"errors"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// A family is withdrawn for a while, and a call to it retryable, while
// its capability starts, restarts or waits, or while a family it needs
// is; for good once the capability failed or stopped, or when no
// capability describes it.
func TestWithdrawnFollowsTheCapabilitysState(t *testing.T) {
	r := newTestRegistry(t)
	describe := func(name string, families ...Family) {
		var names []string
		for _, f := range families {
			names = append(names, f.Name)
		}
		r.Declare(name, "plugin-"+name)
		r.Describe(name, "plugin-"+name, "1.0.0", names)
		r.Ready(name, families, &fakeInvoker{name: name})
	}
	describe("kv", Family{Name: "acme.kv"})
	describe("watch", Family{Name: "acme.watch", Needs: []string{"acme.kv"}})

	check := func(step, family string, want bool, wantState State) {
		t.Helper()
		_, state, ok := r.Withdrawn(family)
		if ok != want || state != wantState {
			t.Errorf("%s: Withdrawn(%s) = %q, %v; want %q, %v", step, family, state, ok, wantState, want)
		}
		err := r.NotServed(family, "host."+family)
		code := wop.CodeCapabilityNotProvided
		if want {
			code = wop.CodeUnavailable
		}
		if err.Code != code || err.Retryable != want || err.Capability != "host."+family {
			t.Errorf("%s: NotServed(%s) = %+v; want %s, retryable %v", step, family, err, code, want)
		}
	}
	check("served", "acme.kv", false, "")
	check("unknown", "acme.none", false, "")

	r.Crash("kv", errors.New("exited"))
	check("crashed", "acme.kv", true, StateCrashed)
	check("needs a crashed family", "acme.watch", true, StateCrashed)
	r.Restarting("kv")
	check("restarting", "acme.kv", true, StateRestarting)
	r.Advance("kv", StateStarted)
	check("starting again", "acme.kv", true, StateStarted)
	r.Wait("kv", errors.New("database down"))
	check("waiting", "acme.kv", true, StateWaiting)
	r.Ready("kv", []Family{{Name: "acme.kv"}}, &fakeInvoker{name: "kv"})
	check("ready again", "acme.kv", false, "")
	check("its need ready again", "acme.watch", false, "")

	r.Fail("kv", StateRestarting, errors.New("gave up after 5 restart attempts"))
	check("failed", "acme.kv", false, "")
	check("needs a failed family", "acme.watch", false, "")
	r.Describe("kv", "plugin-kv", "1.0.0", []string{"acme.kv"})
	check("described again", "acme.kv", true, StateDescribed)
	r.Stop("kv")
	check("stopped", "acme.kv", false, "")
}
