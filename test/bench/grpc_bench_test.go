package bench

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grpcEchoMethod is the method test/grpcecho serves.
const grpcEchoMethod = "/wophost.bench.Echo/Echo"

// grpcPeer is a bare gRPC connection to a grpcecho process: what one gRPC
// hop between two processes costs on this machine with grpc-go alone, no
// TLS, no go-plugin and none of the host's or the SDK's code.
type grpcPeer struct {
	conn *grpc.ClientConn
	pid  int
}

// startGRPCPeer starts grpcecho on a fresh unix socket and connects to it;
// both end with tb.
func startGRPCPeer(tb testing.TB) *grpcPeer {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "grpc.sock")
	cmd := exec.Command(binary(tb, "./test/grpcecho"), path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		tb.Fatalf("grpcecho did not start: %q, %v", line, err)
	}
	// The windows are the ones the host's and the plugins' connections use.
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(1<<20), grpc.WithStaticConnWindowSize(4<<20))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return &grpcPeer{conn: conn, pid: cmd.Process.Pid}
}

// roundTrips makes n unary calls with the benchmark payload, each
// checked.
func (p *grpcPeer) roundTrips(n int) error {
	ctx := context.Background()
	in, out := wrapperspb.Bytes([]byte(payload)), new(wrapperspb.BytesValue)
	for range n {
		if err := p.conn.Invoke(ctx, grpcEchoMethod, in, out); err != nil {
			return err
		}
		if string(out.Value) != payload {
			return fmt.Errorf("grpcecho answered %q", out.Value)
		}
	}
	return nil
}

// BenchmarkGRPCRoundTrip is the cost of a gRPC hop on this machine,
// between the two floors every call figure stands on: b.N round trips of
// the payload over a bare unix socket, b.N bare gRPC calls to grpcecho,
// and b.N direct Invokes on testcap (mutual TLS, the wire's messages, the
// plugin SDK), in one run. It also reports each side's CPU per gRPC call.
func BenchmarkGRPCRoundTrip(b *testing.B) {
	sock := startSocketPeer(b)
	peer := startGRPCPeer(b)
	c := startDirect(b)
	meter := newCPUMeter([]string{"caller", "server"}, 0, peer.pid)
	ctx := context.Background()
	took := timeCalls(b, sock.roundTrips, meter.wrap(b, peer.roundTrips),
		func(n int) error { return directCalls(ctx, c, n) })
	perCall := func(i int) float64 { return float64(took[i].Nanoseconds()) / float64(b.N) }
	b.ReportMetric(perCall(0), "socket-ns/rtt")
	b.ReportMetric(perCall(1), "grpc-ns/rtt")
	b.ReportMetric(perCall(2), "direct-ns/call")
	meter.report(b, "grpc-", b.N)
}
