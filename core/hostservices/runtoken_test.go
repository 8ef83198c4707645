package hostservices

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

// tokenFixture is a router over test.echo and test.other and three runs
// in flight: holder and sibling of one pack, stranger of another. Only
// holder declares test.other.
type tokenFixture struct {
	router                    *dispatch.Router
	runs                      *dispatch.Runs
	inv                       *recorder
	holder, sibling, stranger *dispatch.Run
	log                       *syncBuffer
}

// syncBuffer is a log destination safe for the concurrent writes of a
// logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTokenFixture(t *testing.T) *tokenFixture {
	t.Helper()
	reg := registry.New(registry.Implementation{Name: "wophost", Version: "test"})
	f := &tokenFixture{inv: &recorder{}, runs: dispatch.NewRuns(), log: &syncBuffer{}}
	reg.Declare("test", "testcap")
	reg.Ready("test", []registry.Family{
		{Name: "test.echo", Methods: []string{"echo"}},
		{Name: "test.other", Methods: []string{"echo"}},
	}, f.inv)
	f.router = dispatch.NewRouter(reg, 8, 1<<20)
	declares := func(families ...string) func(string, string) bool {
		return func(family, _ string) bool {
			for _, d := range families {
				if d == family {
					return true
				}
			}
			return false
		}
	}
	newRun := func(pack, typeID string, allowed func(string, string) bool) *dispatch.Run {
		r := &dispatch.Run{
			ID: dispatch.NewID("run"), NodeID: dispatch.NewID("node"), TypeID: typeID, Pack: pack,
			Allowed: allowed, Token: dispatch.NewRunToken(),
		}
		t.Cleanup(f.runs.Add(r))
		return r
	}
	f.holder = newRun("private.wophost.sibling", "sibling.holder", declares("test.echo", "test.other"))
	f.sibling = newRun("private.wophost.sibling", "sibling.forger", declares("test.echo"))
	f.stranger = newRun("test.stranger", "stranger.node", declares("test.echo", "test.other"))
	return f
}

func (f *tokenFixture) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: f.log, Level: hclog.Debug})
}

// call sends family.echo from s with call as the claimed call context.
func (f *tokenFixture) call(s *Server, family string, call wop.CallContext) *wop.Error {
	_, err := s.Call(context.Background(), &wophostv1.CallRequest{
		Family: family, Method: "echo", Payload: []byte(`{}`), Call: hostwire.CallContextToProto(call),
	})
	if err == nil {
		return nil
	}
	return hostwire.FromStatus(err)
}

// withToken returns c with its token replaced.
func withToken(c wop.CallContext, token wop.RunToken) wop.CallContext {
	c.Token = token
	return c
}

// A node's call must carry its run's token: the run id of a sibling node
// in flight, with no token, a made-up one or the caller's own, does not
// let it act in that run, nor get that node's declared families. The
// refusal reaches no plugin and logs no secret.
func TestPackCallNeedsTheRunsToken(t *testing.T) {
	f := newTokenFixture(t)
	s := ForPack(f.router, f.runs, f.logger(), "private.wophost.sibling")

	// The runs' own calls, with their own tokens, are served.
	if err := f.call(s, "test.other", f.holder.CallContext("pack:private.wophost.sibling")); err != nil {
		t.Fatalf("holder's own declared call refused: %+v", err)
	}
	if err := f.call(s, "test.echo", f.sibling.CallContext("pack:private.wophost.sibling")); err != nil {
		t.Fatalf("sibling's own call refused: %+v", err)
	}
	// Least privilege still holds for a bound call.
	if err := f.call(s, "test.other", f.sibling.CallContext("pack:private.wophost.sibling")); err == nil || err.Code != wop.CodeCapabilityNotDeclared {
		t.Fatalf("sibling's undeclared call: %+v, want capability_not_declared", err)
	}

	before := f.inv.count()
	holder := f.holder.CallContext("pack:private.wophost.sibling")
	for _, tc := range []struct {
		name  string
		call  wop.CallContext
		token string // in the message: "no run token" or "not the run's"
	}{
		{"holder's run id, no token", withToken(holder, wop.RunToken{}), "no run token"},
		{"holder's run id, a made-up token", withToken(holder, wop.NewRunToken("guess")), "not the run's"},
		{"holder's run id, a fresh random token", withToken(holder, dispatch.NewRunToken()), "not the run's"},
		{"holder's run id, the sibling's own token", withToken(holder, f.sibling.Token), "not the run's"},
		{"holder's run id, another pack's run token", withToken(holder, f.stranger.Token), "not the run's"},
		// The other way round: a token that leaked does not bind another
		// run, not even the caller's own.
		{"sibling's run id, the holder's token", withToken(f.sibling.CallContext("pack:private.wophost.sibling"), f.holder.Token), "not the run's"},
	} {
		for _, family := range []string{"test.other", "test.echo"} {
			err := f.call(s, family, tc.call)
			if err == nil || err.Code != wop.CodeCapabilityNotDeclared || err.Capability != "host."+family+".echo" {
				t.Errorf("%s, %s: %+v, want capability_not_declared for host.%s.echo", tc.name, family, err, family)
				continue
			}
			if !strings.Contains(err.Message, tc.token) || !strings.Contains(err.Message, "may not act in run "+tc.call.RunID) {
				t.Errorf("%s: message %q does not say the call carries %s for run %s", tc.name, err.Message, tc.token, tc.call.RunID)
			}
		}
	}
	if n := f.inv.count(); n != before {
		t.Errorf("%d calls with a wrong or missing token reached the plugin", n-before)
	}
	for _, secret := range []string{f.holder.Token.Reveal(), f.sibling.Token.Reveal(), f.stranger.Token.Reveal()} {
		if strings.Contains(f.log.String(), secret) {
			t.Errorf("a run token is in the log:\n%s", f.log.String())
		}
	}
	if !strings.Contains(f.log.String(), "RunToken(redacted)") || !strings.Contains(f.log.String(), f.holder.ID) {
		t.Errorf("the refusals are not logged with the run id and a redacted token:\n%s", f.log.String())
	}
}

// Another pack's run stays out of reach even with its own token, which
// the pack could only have had from a leak: the run is not the pack's.
func TestPackCallWithAnotherPacksRunAndToken(t *testing.T) {
	f := newTokenFixture(t)
	s := ForPack(f.router, f.runs, f.logger(), "private.wophost.sibling")
	err := f.call(s, "test.other", f.stranger.CallContext("pack:private.wophost.sibling"))
	if err == nil || err.Code != wop.CodeCapabilityNotDeclared || !strings.Contains(err.Message, "does not belong to pack private.wophost.sibling") {
		t.Fatalf("another pack's run id and token: %+v, want capability_not_declared (not the pack's run)", err)
	}
	if n := f.inv.count(); n != 0 {
		t.Errorf("%d refused calls reached the plugin", n)
	}
}

// A run that has finished is not in flight: its id and token are
// not_found, as before tokens.
func TestFinishedRunIsNotFound(t *testing.T) {
	f := newTokenFixture(t)
	s := ForPack(f.router, f.runs, f.logger(), "private.wophost.sibling")
	run := &dispatch.Run{ID: dispatch.NewID("run"), TypeID: "sibling.holder", Pack: "private.wophost.sibling", Token: dispatch.NewRunToken()}
	remove := f.runs.Add(run)
	call := run.CallContext("pack:private.wophost.sibling")
	remove()
	if err := f.call(s, "test.echo", call); err == nil || err.Code != wop.CodeNotFound {
		t.Fatalf("finished run: %+v, want not_found", err)
	}
}

// A run the host recorded without a token binds no call, not even one
// that carries no token either: a forgotten token fails closed.
func TestRunWithoutTokenBindsNothing(t *testing.T) {
	f := newTokenFixture(t)
	s := ForPack(f.router, f.runs, f.logger(), "private.wophost.sibling")
	run := &dispatch.Run{ID: dispatch.NewID("run"), TypeID: "sibling.holder", Pack: "private.wophost.sibling", Allowed: allowAll}
	t.Cleanup(f.runs.Add(run))
	if err := f.call(s, "test.echo", run.CallContext("pack:private.wophost.sibling")); err == nil || err.Code != wop.CodeCapabilityNotDeclared {
		t.Fatalf("call in a run without a token: %+v, want capability_not_declared", err)
	}
}

// A plugin's callbacks carry the token of the run it was called for, as
// a pack's calls do: a plugin cannot act in a run that never reached it
// by naming the run's id. Its callbacks with the token it was given are
// served.
func TestPluginCallbackNeedsTheRunsToken(t *testing.T) {
	f := newTokenFixture(t)
	s := ForPlugin(f.router, f.runs, f.logger(), "sampler", allowAll)
	call := f.holder.CallContext("plugin:sampler")
	call.Depth = 2
	if err := f.call(s, "test.echo", call); err != nil {
		t.Fatalf("callback with the run's token refused: %+v", err)
	}
	for _, token := range []wop.RunToken{{}, f.sibling.Token, dispatch.NewRunToken()} {
		if err := f.call(s, "test.echo", withToken(call, token)); err == nil || err.Code != wop.CodeCapabilityNotDeclared ||
			!strings.Contains(err.Message, "plugin sampler may not act in run "+f.holder.ID) {
			t.Errorf("callback with token %v: %+v, want capability_not_declared naming the plugin and the run", token, err)
		}
	}
	if n := f.inv.count(); n != 1 {
		t.Errorf("%d calls reached the plugin, want the one bound call", n)
	}
}

// A plugin's callback may narrow the run's deadline, to a budget of its
// own, but never extend it: the call reaches its plugin with the earlier
// of the two.
func TestPluginCallbackNeverExtendsTheRunsDeadline(t *testing.T) {
	f := newTokenFixture(t)
	s := ForPlugin(f.router, f.runs, f.logger(), "sampler", allowAll)
	deadline := time.Now().Add(time.Hour)
	bounded := &dispatch.Run{ID: dispatch.NewID("run"), TypeID: "sibling.holder", Pack: "private.wophost.sibling", Deadline: deadline, Token: dispatch.NewRunToken()}
	t.Cleanup(f.runs.Add(bounded))
	for _, tc := range []struct {
		name            string
		run             *dispatch.Run
		claimed, passed time.Time
	}{
		{"a later deadline", bounded, deadline.Add(time.Hour), deadline},
		{"an earlier deadline", bounded, deadline.Add(-time.Minute), deadline.Add(-time.Minute)},
		{"no deadline", bounded, time.Time{}, deadline},
		{"a deadline in a run without one", f.holder, deadline, deadline},
	} {
		call := tc.run.CallContext("plugin:sampler")
		call.Depth, call.Deadline = 2, tc.claimed
		before := f.inv.count()
		if err := f.call(s, "test.echo", call); err != nil {
			t.Fatalf("%s: %+v", tc.name, err)
		}
		if n := f.inv.count() - before; n != 1 {
			t.Fatalf("%s: %d calls reached the plugin, want 1", tc.name, n)
		}
		if got := f.inv.lastDeadline(); !got.Equal(tc.passed) {
			t.Errorf("%s: the plugin got the deadline %v, want %v", tc.name, got, tc.passed)
		}
	}
}
