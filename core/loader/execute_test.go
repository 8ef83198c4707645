package loader

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// noExecute is a pack's gRPC client whose Execute always fails, so that a
// run that succeeds did not take the gRPC connection.
type noExecute struct{ wophostv1.PackClient }

func (noExecute) Execute(context.Context, *wophostv1.ExecuteRequest, ...grpc.CallOption) (*wophostv1.ExecuteResponse, error) {
	return nil, errors.New("the run took the gRPC connection")
}

// olderPack is the gRPC client of a pack built before the execute
// channel: it answers OpenExecuteChannel UNIMPLEMENTED.
type olderPack struct{ wophostv1.PackClient }

func (olderPack) OpenExecuteChannel(context.Context, *wophostv1.OpenExecuteChannelRequest, ...grpc.CallOption) (*wophostv1.OpenExecuteChannelResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method OpenExecuteChannel not implemented")
}

// startProbe starts the probe pack, its execute channel opened when open
// is set, with its client wrapped by wrap.
func startProbe(t *testing.T, open bool, wrap func(wophostv1.PackClient) wophostv1.PackClient) *Pack {
	t.Helper()
	probe := testbin.NewCache(t.TempDir()).MustBinary(t, "./test/packs/probe")
	var log syncBuffer
	p, err := StartPack("probe", openExecutable(t, probe), testOptions(30*time.Second, &log))
	if err != nil {
		t.Fatalf("start: %v\n%s", err, log.String())
	}
	t.Cleanup(p.Kill)
	if wrap != nil {
		p.conn.Client = wrap(p.conn.Client)
	}
	if open {
		if err := p.OpenExecuteChannel(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func probeRun(typeID, input string) *wophostv1.ExecuteRequest {
	return &wophostv1.ExecuteRequest{TypeId: typeID, Input: []byte(input), Call: &wophostv1.CallContext{RunId: "run_1", NodeId: "n1", TypeId: typeID}}
}

// Once the pack's execute channel is open, its runs and their failures
// travel on it and not on gRPC; without it, on gRPC.
func TestExecuteTakesThePacksChannelOnceOpen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, open := range []bool{true, false} {
		p := startProbe(t, open, func(c wophostv1.PackClient) wophostv1.PackClient { return noExecute{c} })
		if p.ExecuteChannel() != open {
			t.Errorf("open %v: ExecuteChannel() = %v", open, p.ExecuteChannel())
		}
		out, _, err := p.Execute(ctx, probeRun("probe.validated", `{"n":1}`))
		switch {
		case open && (err != nil || string(out) != `{"n":1}`):
			t.Errorf("with the channel: %s, %v; want the answer on the channel", out, err)
		case !open && (err == nil || !strings.Contains(err.Error(), "took the gRPC connection")):
			t.Errorf("without the channel: %s, %v; want the gRPC connection's failure", out, err)
		}
		if !open {
			continue
		}
		_, _, err = p.Execute(ctx, probeRun("probe.nothere", `{}`))
		if we := wop.AsError(err); we == nil || we.Code != wop.CodeNotFound || !strings.Contains(we.Message, "probe.nothere") {
			t.Errorf("a node the pack lacks, on the channel: %v; want its not_found", err)
		}
	}
}

// A pack that cannot serve the execute channel (built before it) keeps
// its runs on gRPC.
func TestExecuteStaysOnGRPCForAnOlderPack(t *testing.T) {
	p := startProbe(t, true, func(c wophostv1.PackClient) wophostv1.PackClient { return olderPack{c} })
	if p.ExecuteChannel() {
		t.Fatal("the channel is open on a pack that answered UNIMPLEMENTED")
	}
	out, _, err := p.Execute(context.Background(), probeRun("probe.validated", `{"n":2}`))
	if err != nil || string(out) != `{"n":2}` {
		t.Errorf("on gRPC: %s, %v", out, err)
	}
}

// A pack process that dies during a run on the channel fails the run as
// unreachable, the process's failure and not the node's.
func TestExecuteOnTheChannelSeesThePackDie(t *testing.T) {
	p := startProbe(t, true, nil)
	log := filepath.Join(t.TempDir(), "started")
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Execute(context.Background(), probeRun("probe.sleep", `{"ms":60000,"inPack":true,"log":"`+log+`"}`))
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(log); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnreachable) {
			t.Errorf("run of a killed pack: %v; want ErrUnreachable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run outlived its pack")
	}
}

// failedWithAccount is a pack's gRPC client whose Execute fails the node
// as the SDK does when it kept an account of its direct calls: the
// account rides in the status beside the envelope.
type failedWithAccount struct{ wophostv1.PackClient }

func (failedWithAccount) Execute(context.Context, *wophostv1.ExecuteRequest, ...grpc.CallOption) (*wophostv1.ExecuteResponse, error) {
	st, err := status.Convert(hostwire.ToStatus(wop.Errorf("acme.refused", "the node refused"))).
		WithDetails(&wophostv1.DirectCallLog{Calls: []*wophostv1.DirectCall{{Family: "acme.kv", Method: "get"}}, Dropped: 2})
	if err != nil {
		return nil, err
	}
	return nil, st.Err()
}

// A node that failed on gRPC hands the host its account of direct calls
// with its envelope, as one that failed on the execute channel does.
func TestExecuteOnGRPCKeepsAFailedRunsAccount(t *testing.T) {
	p := startProbe(t, false, func(c wophostv1.PackClient) wophostv1.PackClient { return failedWithAccount{c} })
	_, account, err := p.Execute(context.Background(), probeRun("probe.validated", `{}`))
	if we := wop.AsError(err); we == nil || we.Code != "acme.refused" {
		t.Fatalf("err = %v, want the node's acme.refused", err)
	}
	if calls := account.GetCalls(); len(calls) != 1 || calls[0].GetMethod() != "get" || account.GetDropped() != 2 {
		t.Errorf("account %v, want the one call and two dropped", account)
	}
}
