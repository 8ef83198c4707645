package loader

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// Pack is a started pack process.
type Pack struct {
	proc     *process
	conn     *hostwire.PackConn
	broker   uint32
	maxBytes int
	// runs is the pack's execute channel (OpenExecuteChannel), nil when
	// its runs go on gRPC.
	runs *hostwire.Relay
}

// StartPack execs the opened pack binary exe (see OpenPackEntry) and
// completes the handshake. It closes exe once the process has started.
func StartPack(name string, exe *Executable, opts Options) (*Pack, error) {
	proc, rpc, err := startProcess(name, exe, opts)
	if err != nil {
		return nil, &PhaseError{Phase: "started", Err: err}
	}
	raw, err := rpc.Dispense(hostwire.KindPack)
	if err != nil {
		proc.kill()
		return nil, &PhaseError{Phase: "negotiated", Err: err}
	}
	conn, ok := raw.(*hostwire.PackConn)
	if !ok {
		proc.kill()
		return nil, &PhaseError{Phase: "negotiated", Err: fmt.Errorf("unexpected pack client %T", raw)}
	}
	return &Pack{proc: proc, conn: conn, maxBytes: opts.MaxMessageBytes}, nil
}

// OpenExecuteChannel asks the pack process to serve its node runs on the
// direct channel's framing, in a private directory of the process's and
// under a key of its own, and sends every later Execute there. A pack
// that does not implement it (an older SDK, another language's) keeps
// gRPC, and so does one that fails to open it, which the error says.
// Call it once, before the process's first run.
func (p *Pack) OpenExecuteChannel(ctx context.Context) error {
	dir, err := p.proc.directDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	key := hostwire.NewGrantKey()
	resp, err := p.conn.Client.OpenExecuteChannel(ctx, &wophostv1.OpenExecuteChannelRequest{Key: key, SocketDir: dir})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil
	case err != nil:
		return p.proc.callError("OpenExecuteChannel", p.Exited(), err)
	case resp.GetEndpoint().GetAddress() == "":
		return errors.New("OpenExecuteChannel: the pack answered no endpoint")
	}
	p.runs = hostwire.NewRelay(resp.GetEndpoint(), key, p.maxBytes)
	return nil
}

// ExecuteChannel reports whether the pack's runs go on its execute
// channel rather than gRPC.
func (p *Pack) ExecuteChannel() bool { return p.runs != nil }

// MemoryBreach reports whether the kernel killed the contained process
// for its memory cap, and the cap in bytes.
func (p *Pack) MemoryBreach() (limit int64, exceeded bool) { return p.proc.memoryBreach() }

// Manifest returns the pack.json bytes the binary was built with.
func (p *Pack) Manifest(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := p.conn.Client.Manifest(ctx, &wophostv1.ManifestRequest{})
	if err != nil {
		return nil, p.proc.callError("Manifest", p.Exited(), err)
	}
	return resp.GetPackJson(), nil
}

// ServeHostServices serves impl to the pack on the broker. Call it once;
// every Execute carries the same broker id.
func (p *Pack) ServeHostServices(impl wophostv1.HostServicesServer, maxBytes int) {
	p.broker = hostwire.ServeHostServices(p.conn.Broker, impl, maxBytes)
}

// ErrUnreachable is Execute's error when the pack process could not be
// reached or went away during the call: the connection failed, rather
// than the node.
var ErrUnreachable = errors.New("pack process unreachable")

// Execute runs one node and returns its output and the pack's account of
// its direct calls, when the request asked for one and the pack kept it
// (nil otherwise), whether the node succeeded or failed. A failure of the
// connection rather than of the node is ErrUnreachable, wrapping the
// transport's words.
func (p *Pack) Execute(ctx context.Context, req *wophostv1.ExecuteRequest) ([]byte, *wophostv1.DirectCallLog, error) {
	req.HostServicesBrokerId = p.broker
	if p.runs != nil {
		resp, sent, err := p.runs.Execute(ctx, req)
		switch {
		case !sent:
			// The channel was unreachable, or the pack refused the key:
			// gRPC, as to a pack without the channel.
		case errors.Is(err, hostwire.ErrChannelGone):
			return nil, nil, fmt.Errorf("%w: the execute channel closed during the run", ErrUnreachable)
		case err != nil:
			return nil, nil, err
		case resp.GetFailure() != nil:
			return nil, resp.GetDirectCalls(), hostwire.FromDetail(resp.GetFailure())
		default:
			return resp.GetOutput(), resp.GetDirectCalls(), nil
		}
	}
	resp, err := p.conn.Client.Execute(ctx, req)
	if err != nil {
		if ctx.Err() == nil && transportFailure(err) {
			return nil, nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		return nil, failureAccount(err), hostwire.FromStatus(err)
	}
	return resp.GetOutput(), resp.GetDirectCalls(), nil
}

// failureAccount is the account of direct calls a failed node's status
// carries beside its envelope, or nil.
func failureAccount(err error) *wophostv1.DirectCallLog {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if l, ok := d.(*wophostv1.DirectCallLog); ok {
			return l
		}
	}
	return nil
}

// transportFailure reports whether err is gRPC's own failure of the
// connection: Unavailable or Canceled without the error envelope every
// answer of the SDK carries.
func transportFailure(err error) bool {
	st, ok := status.FromError(err)
	if !ok || len(st.Details()) > 0 {
		return false
	}
	return st.Code() == codes.Unavailable || st.Code() == codes.Canceled
}

// Exited is closed when the pack process exits.
func (p *Pack) Exited() <-chan struct{} { return p.conn.Exited.Done() }

// PID returns the pack process's id (for measurements such as its CPU
// time under /proc), or 0 when it is not known.
func (p *Pack) PID() int { return p.proc.pid() }

// Kill stops the pack process and its process group.
func (p *Pack) Kill() {
	p.closeRuns()
	p.proc.kill()
}

// closeRuns closes the execute channel's connection, if any.
func (p *Pack) closeRuns() {
	if p.runs != nil {
		p.runs.Close()
	}
}

// LastWords is the end of what the pack process wrote to stderr (the
// start of a panic, or its last lines), on one line; "" when it wrote
// nothing. Read it once the process has exited to say why.
func (p *Pack) LastWords() string { return p.proc.lastWords() }

// Abort kills the pack process and its process group at once, without
// asking it to exit first: for a process that no longer answers.
func (p *Pack) Abort() {
	p.closeRuns()
	p.proc.stop(false)
}

// CheckHealth asks the pack process the protocol's health check within
// ctx (go-plugin serves grpc.health.v1 in every process it serves): nil
// when it answers SERVING.
func (p *Pack) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, p.conn.Health, "pack")
}

// Gone reports whether the pack process has exited.
func (p *Pack) Gone() bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}
