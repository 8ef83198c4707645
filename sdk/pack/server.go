package pack

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/invoke"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// server adapts a Pack to the Pack gRPC service.
type server struct {
	p        *Pack
	broker   *goplugin.GRPCBroker
	logger   hclog.Logger
	maxBytes int
	tracer   trace.Tracer
	// contained says the host runs this process in a sandbox: a node's
	// failure on a refused operation is then sandbox_capability_denied.
	contained bool

	mu    sync.Mutex
	hosts map[uint32]*wire.HostCaller
	// direct holds the connections to the plugins' direct channels, shared
	// by every run the host offers them to.
	direct *direct.Pool
	// runs is the pack's own channel, on which the host sends its node
	// runs once it asked for it (OpenExecuteChannel); nil until then.
	runs *direct.Endpoint
}

var _ wophostv1.PackServer = (*server)(nil)

func (s *server) Manifest(context.Context, *wophostv1.ManifestRequest) (*wophostv1.ManifestResponse, error) {
	return &wophostv1.ManifestResponse{PackJson: s.p.Manifest}, nil
}

func (s *server) hostCaller(id uint32) wop.Caller {
	if id == 0 {
		return wire.NoHost{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[id]
	if !ok {
		h = wire.NewHostCaller(s.broker, id, s.maxBytes, s.tracer)
		s.hosts[id] = h
	}
	return h
}

// OpenExecuteChannel serves the node runs on the channel's framing as
// well, in the directory and under the key the host gave: the host sends
// its runs there rather than on gRPC, one goroutine hand-off on each side
// instead of three.
func (s *server) OpenExecuteChannel(_ context.Context, req *wophostv1.OpenExecuteChannelRequest) (*wophostv1.OpenExecuteChannelResponse, error) {
	s.mu.Lock()
	if s.runs == nil {
		s.runs = direct.NewExecuteEndpoint(s.executeFramed, s.maxBytes)
	}
	runs := s.runs
	s.mu.Unlock()
	ep, err := runs.Open(&wophostv1.DirectChannelSettings{GrantKey: req.GetKey(), SocketDir: req.GetSocketDir()})
	if err != nil {
		// The host sends its runs on gRPC then, as to a pack without the
		// channel.
		return nil, wire.ToStatus(wop.Errorf(wop.CodeUnavailable, "the pack's execute channel: %v", err))
	}
	return &wophostv1.OpenExecuteChannelResponse{Endpoint: ep}, nil
}

// executeFramed runs a node run that came on the pack's channel, whose
// answer carries the node's failure itself.
func (s *server) executeFramed(ctx context.Context, req *wophostv1.ExecuteRequest) *wophostv1.ExecuteResponse {
	resp, we, calls := s.run(ctx, req)
	if we == nil {
		return resp
	}
	d := wire.ToDetail(we)
	return &wophostv1.ExecuteResponse{Failure: d, DirectCalls: direct.FitAccount(calls, s.maxBytes-proto.Size(d)-accountSlack)}
}

func (s *server) Execute(ctx context.Context, req *wophostv1.ExecuteRequest) (*wophostv1.ExecuteResponse, error) {
	resp, we, calls := s.run(ctx, req)
	if we != nil {
		return nil, failure(we, calls)
	}
	return resp, nil
}

// run runs the node req names and returns its answer, or its failure
// with the pack's account of its direct calls, when it keeps one.
func (s *server) run(ctx context.Context, req *wophostv1.ExecuteRequest) (resp *wophostv1.ExecuteResponse, we *wop.Error, calls *wophostv1.DirectCallLog) {
	call := wire.CallContextFromProto(req.GetCall())
	ctx, span, traceparent := tracing.Start(ctx, s.tracer, call.Traceparent, "node "+req.GetTypeId(), trace.SpanKindServer)
	defer func() {
		var err error
		if we != nil {
			err = we
		}
		tracing.End(span, err, wop.CodeOf(err))
	}()
	call.Traceparent = traceparent
	node, ok := s.p.Nodes[req.GetTypeId()]
	if !ok {
		return nil, wop.Errorf(wop.CodeNotFound, "this pack has no node %q", req.GetTypeId()), nil
	}
	advertised := make(map[string]map[string]json.RawMessage, len(req.GetAdvertised()))
	for fam, raw := range req.GetAdvertised() {
		facets := map[string]json.RawMessage{}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &facets); err != nil {
				return nil, wop.Errorf(wop.CodeInternal, "host sent malformed facets for %s: %v", fam, err), nil
			}
		}
		advertised[fam] = facets
	}
	ctx, cancel := wire.WithCallDeadline(ctx, call)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, wire.FromContextError(err), nil
	}
	logger := s.logger.With("run_id", call.RunID, "node_id", call.NodeID, "type_id", call.TypeID)
	host := s.hostCaller(req.GetHostServicesBrokerId())
	var account *direct.Account
	if routed, ok := host.(direct.RawCaller); ok && s.direct != nil && len(req.GetDirectChannels()) > 0 {
		if dl := req.GetDirectLog(); dl != nil {
			account = direct.NewAccount(dl.GetMaxCalls(), dl.GetMaxBytes())
		}
		caller := direct.NewCaller(routed, s.direct, req.GetDirectChannels(), s.tracer, account)
		caller.BoundCalls(time.Duration(req.GetCallTimeoutMs()) * time.Millisecond)
		host = caller
	}
	c := newCtx(ctx, host, call, advertised, logger)
	out, err := invoke.Safely(logger, "node", func() (any, error) { return node(c, req.GetInput()) })
	calls = account.Seal()
	if err != nil {
		return nil, s.nodeFailure(ctx, err), calls
	}
	b, we := invoke.Result(out, s.maxBytes, "output of "+req.GetTypeId())
	if we != nil {
		return nil, we, calls
	}
	resp = &wophostv1.ExecuteResponse{Output: b}
	if calls != nil {
		// The answer stays within the message size limit: the account
		// takes what the output leaves.
		resp.DirectCalls = direct.FitAccount(calls, s.maxBytes-proto.Size(resp)-accountSlack)
	}
	return resp, nil, nil
}

// nodeFailure is the envelope of err, a node's failure under ctx. In a
// contained pack an operation the sandbox refused is named as such, even
// when ctx ended too: the refusal is why the node failed.
func (s *server) nodeFailure(ctx context.Context, err error) *wop.Error {
	if s.contained {
		if we := sandboxDenial(err); we != nil {
			return we
		}
	}
	return invoke.Failure(ctx, err)
}

// accountSlack is the room an account's own field takes in an answer
// (its tag and length).
const accountSlack = 16

// failureAccountBytes bounds the account a failed node's status carries:
// a status travels in the gRPC trailers, which the host reads up to
// 16 MiB, base64-encoded.
const failureAccountBytes = 4 << 20

// failure is the status of a node's failure we, carrying the pack's
// account of its direct calls, when it keeps one, beside the envelope.
func failure(we error, calls *wophostv1.DirectCallLog) error {
	st := wire.ToStatus(we)
	if calls == nil {
		return st
	}
	calls = direct.FitAccount(calls, failureAccountBytes)
	if calls == nil {
		return st
	}
	withCalls, err := status.Convert(st).WithDetails(calls)
	if err != nil {
		return st
	}
	return withCalls.Err()
}
