package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace"

	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/invoke"
	"github.com/wophost/wophost/sdk/internal/records"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wop"
)

// server adapts a Plugin to the Capability gRPC service.
type server struct {
	p        *Plugin
	broker   *goplugin.GRPCBroker
	logger   hclog.Logger
	maxBytes int
	tracer   trace.Tracer

	mu         sync.RWMutex
	configured bool
	host       *wire.HostCaller
	families   map[string]*Family
	// direct is the plugin's direct channel, nil when it is RoutedOnly.
	direct *direct.Endpoint
}

var _ wophostv1.CapabilityServer = (*server)(nil)

func newServer(p *Plugin, broker *goplugin.GRPCBroker, logger hclog.Logger, maxBytes int, tracer trace.Tracer) *server {
	fams := make(map[string]*Family, len(p.Families))
	for _, f := range p.Families {
		fams[f.Name] = f
	}
	s := &server{p: p, broker: broker, logger: logger, maxBytes: maxBytes, tracer: tracer, families: fams}
	if !p.RoutedOnly {
		s.direct = direct.NewEndpoint(s.handle, maxBytes)
	}
	return s
}

func (s *server) Describe(context.Context, *wophostv1.DescribeRequest) (*wophostv1.DescribeResponse, error) {
	resp := &wophostv1.DescribeResponse{Name: s.p.Name, Version: s.p.Version, SingleWriter: s.p.SingleWriter, DirectChannel: s.direct != nil}
	for _, f := range s.p.Families {
		methods := make([]string, 0, len(f.Methods))
		for m := range f.Methods {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		pure := slices.Clone(f.Pure)
		sort.Strings(pure)
		resp.Families = append(resp.Families, &wophostv1.FamilyDescription{
			Name: f.Name, Status: f.Status, Since: f.Since, Until: f.Until, Witness: f.Witness,
			Methods: methods, Needs: f.Needs, Uses: f.Uses, PureMethods: pure,
			FacetRules: wire.FacetRulesToProto(f.FacetRules),
		})
	}
	return resp, nil
}

func (s *server) ConfigSchema(context.Context, *wophostv1.ConfigSchemaRequest) (*wophostv1.ConfigSchemaResponse, error) {
	b, err := json.Marshal(s.p.ConfigSchema)
	if err != nil {
		return nil, wire.ToStatus(fmt.Errorf("marshal config schema: %w", err))
	}
	return &wophostv1.ConfigSchemaResponse{Schema: b}, nil
}

func (s *server) Configure(ctx context.Context, req *wophostv1.ConfigureRequest) (*wophostv1.ConfigureResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.host == nil && req.GetHostServicesBrokerId() != 0 {
		s.host = wire.NewHostCaller(s.broker, req.GetHostServicesBrokerId(), s.maxBytes, s.tracer)
	}
	var host wop.Caller = s.host
	if s.host == nil {
		host = wire.NoHost{}
	}
	// The host has checked the schema's constraints already, where the
	// operator wrote each value; a config that reached the plugin another
	// way is held to them here, so Configure can rely on them.
	if ces := constraintErrors(s.p.ConfigSchema, req.GetConfig()); len(ces) > 0 {
		return &wophostv1.ConfigureResponse{Diagnostics: toDiagnostics(ces)}, nil
	}
	var warnings ConfigErrors
	if s.p.Configure != nil {
		creq := &ConfigureRequest{
			Config: req.GetConfig(), StateDir: req.GetStateDir(), Storage: StorageFromProto(req.GetStorage()),
			Host: host, Logger: s.logger,
		}
		err := s.safeConfigure(ctx, creq)
		warnings = creq.warnings
		var ce *ConfigError
		var ces ConfigErrors
		switch {
		case errors.As(err, &ces):
			return &wophostv1.ConfigureResponse{Diagnostics: toDiagnostics(ces)}, nil
		case errors.As(err, &ce):
			return &wophostv1.ConfigureResponse{Diagnostics: toDiagnostics(ConfigErrors{ce})}, nil
		case err != nil:
			return nil, wire.ToStatus(err)
		}
	}
	resp := &wophostv1.ConfigureResponse{Facets: map[string][]byte{}, Details: map[string][]byte{}, Warnings: toDiagnostics(warnings)}
	for _, f := range s.p.Families {
		facets := map[string]any{}
		if f.Facets != nil {
			for k, v := range f.Facets() {
				if v == nil {
					v = struct{}{}
				}
				facets[k] = v
			}
		}
		b, err := json.Marshal(facets)
		if err != nil {
			return nil, wire.ToStatus(fmt.Errorf("marshal facets of %s: %w", f.Name, err))
		}
		if err := checkFacets(f.Name, b); err != nil {
			return nil, wire.ToStatus(err)
		}
		resp.Facets[f.Name] = b
		if f.Details != nil {
			if d := f.Details(); d != nil {
				b, err := json.Marshal(d)
				if err != nil {
					return nil, wire.ToStatus(fmt.Errorf("marshal details of %s: %w", f.Name, err))
				}
				resp.Details[f.Name] = b
			}
		}
	}
	if settings := req.GetDirectChannel(); settings != nil && s.direct != nil {
		// Every Configure brings a new key: grants made before it are
		// refused, and their packs go through the host.
		// A channel that cannot open leaves the plugin on the routed
		// path, where every call still reaches it.
		if ep, err := s.direct.Open(settings); err != nil {
			s.logger.Warn("no direct channel: every call goes through the host", "error", err)
		} else {
			resp.DirectChannel = ep
		}
	}
	s.configured = true
	// What the start-up allocated and dropped (the config's decoding, the
	// plugin's set-up, migrations) is garbage the runtime would keep
	// mapped: below its collection goal, the scavenger leaves it. A plugin
	// spends most of its life idle, so it is handed back once, after the
	// answer, off the start's path.
	go debug.FreeOSMemory()
	return resp, nil
}

// EndRun implements Capability.EndRun: the run's grants are refused from
// now on, and the host gets the calls the run made on the direct channel.
func (s *server) EndRun(_ context.Context, req *wophostv1.EndRunRequest) (*wophostv1.EndRunResponse, error) {
	if s.direct == nil {
		return &wophostv1.EndRunResponse{}, nil
	}
	return s.direct.EndRun(req.GetRunId(), time.Unix(0, req.GetDeadlineUnixNano())), nil
}

func (s *server) safeConfigure(ctx context.Context, req *ConfigureRequest) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("configure panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = wop.Errorf(wop.CodeInternal, "configure panicked: %v", r)
		}
	}()
	return s.p.Configure(ctx, req)
}

func toDiagnostics(es ConfigErrors) []*wophostv1.ConfigDiagnostic {
	out := make([]*wophostv1.ConfigDiagnostic, 0, len(es))
	for _, e := range es {
		out = append(out, &wophostv1.ConfigDiagnostic{Summary: e.Summary, Detail: e.Detail, Path: e.Path})
	}
	return out
}

func (s *server) Invoke(ctx context.Context, req *wophostv1.InvokeRequest) (resp *wophostv1.InvokeResponse, err error) {
	out, err := s.handle(ctx, req.GetFamily(), req.GetMethod(), req.GetPayload(), wire.CallContextFromProto(req.GetCall()))
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &wophostv1.InvokeResponse{Result: out}, nil
}

// handle runs one call of family.method, relayed by the host or on the
// direct channel, and returns its result or its *wop.Error.
func (s *server) handle(ctx context.Context, family, method string, payload []byte, call wop.CallContext) (_ []byte, err error) {
	// The span covers the refusals too: a trace should show where a call
	// stopped.
	var span trace.Span
	ctx, span, call.Traceparent = tracing.StartCall(ctx, s.tracer, call.Traceparent, "plugin", family, method, trace.SpanKindServer)
	defer func() { tracing.End(span, err, wop.CodeOf(err)) }()
	s.mu.RLock()
	configured, host := s.configured, s.host
	s.mu.RUnlock()
	capability := "host." + family + "." + method
	if !configured {
		return nil, wop.Errorf(wop.CodeUnavailable, "plugin %s is not configured yet", s.p.Name).WithCapability(capability).WithRetryable(true)
	}
	f, ok := s.families[family]
	if !ok {
		return nil, wop.Errorf(wop.CodeNotFound, "plugin %s does not serve family %q", s.p.Name, family).WithCapability(capability)
	}
	h, ok := f.Methods[method]
	if !ok {
		return nil, wop.Errorf(wop.CodeNotFound, "family %s has no method %q", f.Name, method).WithCapability(capability)
	}
	ctx, cancel := wire.WithCallDeadline(ctx, call)
	defer cancel()
	ctx = wop.WithCallContext(ctx, call)
	// A call whose deadline already passed never reaches the handler: a
	// handler that ignores ctx would otherwise succeed after the fact.
	if err := ctx.Err(); err != nil {
		return nil, wire.FromContextError(err).WithCapability(capability)
	}
	var caller wop.Caller = wire.NoHost{}
	if host != nil {
		caller = host
	}
	r := &Request{
		Family: family, Method: method, Payload: payload, Call: call, Host: caller,
		Logger: s.logger.With("run_id", call.RunID, "node_id", call.NodeID, "capability", capability),
	}
	out, err := invoke.Safely(r.Logger, "handler", func() (any, error) { return h(ctx, r) })
	if err != nil {
		we := invoke.Failure(ctx, err)
		if !f.allows(we.Code) {
			r.Logger.Error("handler returned an error code its family does not declare; the host gets internal",
				"code", we.Code, "error", we.Message)
			we = wop.Errorf(wop.CodeInternal, "%s failed with the error code %q, which family %s does not declare: %s", capability, we.Code, f.Name, we.Message).
				WithDetails(map[string]any{"code": we.Code})
		}
		if we.Capability == "" {
			we = we.WithCapability(capability)
		}
		return nil, we
	}
	b, we := invoke.Result(out, s.maxBytes, "result of "+capability)
	if we != nil {
		return nil, we.WithCapability(capability)
	}
	return b, nil
}

// checkFacets refuses the facets b (a JSON object) of family when they
// would not make a valid record of that core family, as the host refuses
// to advertise them (its package's CheckFacets, aienvelope.CheckFacets
// say): Configure fails naming the facet, in the vendor's own tests first.
func checkFacets(family string, b []byte) error {
	var facets map[string]json.RawMessage
	if err := json.Unmarshal(b, &facets); err != nil {
		return fmt.Errorf("facets of %s: %w", family, err)
	}
	if err := records.Check(family, facets); err != nil {
		return fmt.Errorf("family %q would publish an invalid record: %w", family, err)
	}
	return nil
}
