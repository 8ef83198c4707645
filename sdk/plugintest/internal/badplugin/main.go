// Command badplugin is a capability plugin written against the wire
// protocol directly, without the plugin SDK, so that it can break each rule
// the plugintest kit checks. It serves the family test.bad with the methods
// echo and other. By default it follows every rule; BADPLUGIN_BREAK in its
// environment names one rule to break:
//
//   - describe: Describe sends no version.
//   - record: the family's record has the status "bogus", which a host
//     refuses to advertise.
//   - pure-methods: Describe declares a pure method it does not serve
//     (by default echo is pure).
//   - schema: the config schema names an attribute twice.
//   - serve-unconfigured: calls succeed before Configure.
//   - facets: Configure returns no facets for test.bad.
//   - invoke: other returns a result that is not JSON.
//   - unknown-method: an unknown method is internal, not not_found.
//   - unknown-family: a call to an unknown family succeeds.
//   - malformed-payload: a payload that is not JSON is accepted.
//   - call-deadline: the call context's deadline is ignored.
//   - after-deadline: the call after a deadline refusal fails.
//   - keeps-serving: the process exits on the second call after a
//     deadline refusal.
//   - direct-rules: the direct channel is opened without the rules the
//     host sends for it, so that it refuses no call for a facet or an
//     operator-only method (in every family mode).
//   - exit-configure: Configure writes a reason to stderr and exits with
//     status 4.
//
// In every mode it serves a direct channel (direct_channel in Describe),
// opened at Configure with the host's settings, whose calls run as
// Invoke's do; they do not count as calls after a deadline refusal.
//
// BADPLUGIN_FAMILY=aiEnvelope makes it serve the aiEnvelope family
// instead, correctly by default, with the rules to break listed at
// familyAIEnvelope; BADPLUGIN_FAMILY=promptLibrary makes it serve
// promptLibrary, with the rules listed at familyPromptLibrary; and
// BADPLUGIN_FAMILY=mcp makes it serve mcp, with the rules listed at
// familyMCP; BADPLUGIN_FAMILY=agentRuntime makes it serve agentRuntime,
// with the rules listed at familyAgentRuntime.
package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

const family = "test.bad"

func main() {
	maxBytes := wire.MaxMessageBytesFromEnv()
	s := &server{broken: os.Getenv("BADPLUGIN_BREAK"), family: os.Getenv("BADPLUGIN_FAMILY"), maxBytes: maxBytes,
		keys: map[string]envelope{}, byID: map[string]aienvelope.GenerateResult{},
		agents: map[string]*agent{}, spawned: map[string]string{}, messages: map[string]string{}}
	s.direct = direct.NewEndpoint(s.directCall, maxBytes)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: wire.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{
			wire.ProtocolVersion: {
				wire.KindCapability: &wire.CapabilityPlugin{
					NewServer: func(b *goplugin.GRPCBroker) wophostv1.CapabilityServer { s.broker = b; return s },
				},
			},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, wire.ServerOptions(maxBytes)...)...)
		},
		TLSProvider: wire.ServerTLS,
	})
}

type server struct {
	wophostv1.UnimplementedCapabilityServer
	broken string
	// family is BADPLUGIN_FAMILY: empty for test.bad.
	family   string
	maxBytes int
	// broker reaches the host's services; host calls them once
	// Configure named them (the agentRuntime mode).
	broker *goplugin.GRPCBroker
	host   *wire.HostCaller
	// direct is the direct channel, opened at Configure.
	direct *direct.Endpoint

	mu sync.Mutex
	// await is whether the aiEnvelope mode advertised the await facet;
	// keys, byID and next are its envelopes by key and by id, and the
	// number of the last one.
	await      bool
	keys       map[string]envelope
	byID       map[string]aienvelope.GenerateResult
	next       int
	configured bool
	// agents, spawned and messages are the agentRuntime mode's agents by
	// instance id, instance ids by spawn key and message ids by key.
	agents   map[string]*agent
	spawned  map[string]string
	messages map[string]string
	// afterRefusal counts the calls since the last deadline refusal; -1
	// before the first.
	afterRefusal int
}

func (s *server) breaks(rule string) bool { return s.broken == rule }

func (s *server) Describe(ctx context.Context, req *wophostv1.DescribeRequest) (*wophostv1.DescribeResponse, error) {
	resp, err := s.describe(ctx, req)
	if resp != nil {
		resp.DirectChannel = true
	}
	return resp, err
}

func (s *server) describe(context.Context, *wophostv1.DescribeRequest) (*wophostv1.DescribeResponse, error) {
	version := "0.0.1"
	if s.breaks("describe") {
		version = ""
	}
	if s.family == familyAgentRuntime {
		return &wophostv1.DescribeResponse{
			Name: "badplugin", Version: version,
			Families: []*wophostv1.FamilyDescription{{
				Name: agentruntime.Family, Status: "experimental", Since: "2.0", Until: "2099-12-31", Witness: "claims-check",
				Methods: []string{agentruntime.MethodSpawn, agentruntime.MethodDelegate, agentruntime.MethodConsensus, agentruntime.MethodMessageSend},
				Needs:   s.arNeeds(),
			}},
		}, nil
	}
	if s.family == familyMCP {
		return &wophostv1.DescribeResponse{
			Name: "badplugin", Version: version,
			Families: []*wophostv1.FamilyDescription{{
				Name: mcp.Family, Status: "experimental", Since: "2.0", Until: "2099-12-31", Witness: "claims-check",
				Methods: []string{mcp.MethodCallTool, mcp.MethodListTools, mcp.MethodReadResource, mcp.MethodServerHealth},
			}},
		}, nil
	}
	if s.family == familyPromptLibrary {
		return &wophostv1.DescribeResponse{
			Name: "badplugin", Version: version,
			Families: []*wophostv1.FamilyDescription{{
				Name: promptlibrary.Family, Status: "experimental", Since: "2.0", Until: "2099-12-31", Witness: "claims-check",
				Methods: s.plDescribeMethods(),
			}},
		}, nil
	}
	if s.family == familyAIEnvelope {
		return &wophostv1.DescribeResponse{
			Name: "badplugin", Version: version,
			Families: []*wophostv1.FamilyDescription{{
				Name: aienvelope.Family, Status: "experimental", Since: "2.0", Until: "2099-12-31", Witness: "claims-check",
				Methods: s.aiDescribeMethods(),
			}},
		}, nil
	}
	pure := []string{"echo"}
	if s.breaks("pure-methods") {
		pure = append(pure, "nope")
	}
	status := "experimental"
	if s.breaks("record") {
		status = "bogus"
	}
	return &wophostv1.DescribeResponse{
		Name:    "badplugin",
		Version: version,
		Families: []*wophostv1.FamilyDescription{{
			Name: family, Status: status, Since: "2.0", Until: "2099-12-31", Witness: "claims-check",
			Methods: []string{"echo", "other", "fail"}, PureMethods: pure,
		}},
	}, nil
}

func (s *server) ConfigSchema(context.Context, *wophostv1.ConfigSchemaRequest) (*wophostv1.ConfigSchemaResponse, error) {
	schema := `{"attributes":[{"name":"a","type":"string"}]}`
	if s.family == familyAIEnvelope {
		schema = `{"attributes":[{"name":"async","type":"bool"}]}`
	}
	if s.breaks("schema") {
		schema = `{"attributes":[{"name":"a","type":"string"},{"name":"a","type":"string"}]}`
	}
	return &wophostv1.ConfigSchemaResponse{Schema: []byte(schema)}, nil
}

// Configure configures the family mode and opens the direct channel the
// host asks for, without its rules under direct-rules.
func (s *server) Configure(ctx context.Context, req *wophostv1.ConfigureRequest) (*wophostv1.ConfigureResponse, error) {
	if s.breaks("exit-configure") {
		// On the process's own stderr: go-plugin points os.Stderr at a
		// stream that the exit may cut.
		_, _ = os.NewFile(2, "stderr").WriteString("badplugin: the licence server refused key BP-0000\n")
		os.Exit(4)
	}
	resp, err := s.configure(ctx, req)
	if err != nil || req.GetDirectChannel() == nil {
		return resp, err
	}
	settings := req.GetDirectChannel()
	if s.breaks("direct-rules") {
		settings = proto.CloneOf(settings)
		settings.Rules = nil
	}
	ep, err := s.direct.Open(settings)
	if err != nil {
		return nil, wire.ToStatus(wop.Errorf(wop.CodeInternal, "%v", err))
	}
	resp.DirectChannel = ep
	return resp, nil
}

// EndRun ends a run on the direct channel and hands over its calls.
func (s *server) EndRun(_ context.Context, req *wophostv1.EndRunRequest) (*wophostv1.EndRunResponse, error) {
	return s.direct.EndRun(req.GetRunId(), time.Unix(0, req.GetDeadlineUnixNano())), nil
}

// directCall runs a call of the direct channel as Invoke runs it.
func (s *server) directCall(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	return s.serve(ctx, &wophostv1.InvokeRequest{Family: family, Method: method, Payload: payload, Call: wire.CallContextToProto(call)}, true)
}

func (s *server) configure(_ context.Context, req *wophostv1.ConfigureRequest) (*wophostv1.ConfigureResponse, error) {
	if s.family == familyAIEnvelope {
		f := s.aiFacets(req.GetConfig())
		s.mu.Lock()
		s.configured, s.await = true, string(f) != `{}`
		s.mu.Unlock()
		return &wophostv1.ConfigureResponse{Facets: map[string][]byte{aienvelope.Family: f}}, nil
	}
	s.mu.Lock()
	s.configured = true
	s.afterRefusal = -1
	s.mu.Unlock()
	if s.family == familyAgentRuntime {
		s.mu.Lock()
		s.host = wire.NewHostCaller(s.broker, req.GetHostServicesBrokerId(), s.maxBytes, noop.NewTracerProvider().Tracer("badplugin"))
		s.mu.Unlock()
		return &wophostv1.ConfigureResponse{Facets: map[string][]byte{agentruntime.Family: []byte(`{}`)}}, nil
	}
	if s.family == familyMCP {
		return &wophostv1.ConfigureResponse{Facets: map[string][]byte{mcp.Family: s.mcpFacets()}, Details: map[string][]byte{mcp.Family: mcpDetails()}}, nil
	}
	if s.family == familyPromptLibrary {
		return &wophostv1.ConfigureResponse{Facets: map[string][]byte{promptlibrary.Family: []byte(`{}`)}}, nil
	}
	facets := map[string][]byte{family: []byte(`{}`)}
	if s.breaks("facets") {
		facets = nil
	}
	return &wophostv1.ConfigureResponse{Facets: facets}, nil
}

func (s *server) Invoke(ctx context.Context, req *wophostv1.InvokeRequest) (*wophostv1.InvokeResponse, error) {
	out, err := s.serve(ctx, req, false)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &wophostv1.InvokeResponse{Result: out}, nil
}

// serve runs a call, of Invoke or of the direct channel (channel), and
// returns its result or its *wop.Error.
func (s *server) serve(ctx context.Context, req *wophostv1.InvokeRequest, channel bool) ([]byte, error) {
	if s.family == familyAgentRuntime {
		s.mu.Lock()
		configured := s.host != nil
		s.mu.Unlock()
		var out []byte
		var err error
		switch {
		case !configured:
			err = wop.Errorf(wop.CodeUnavailable, "not configured yet")
		case req.GetFamily() != agentruntime.Family:
			err = wop.Errorf(wop.CodeNotFound, "no family %s", req.GetFamily())
		default:
			out, err = s.arInvoke(ctx, req.GetMethod(), req.GetPayload(), wire.CallContextFromProto(req.GetCall()))
		}
		return out, err
	}
	return s.invoke(req, channel)
}

func (s *server) invoke(req *wophostv1.InvokeRequest, channel bool) ([]byte, error) {
	if s.family == familyAIEnvelope {
		s.mu.Lock()
		configured := s.configured
		s.mu.Unlock()
		if !configured {
			return nil, wop.Errorf(wop.CodeUnavailable, "not configured yet")
		}
		if req.GetFamily() != aienvelope.Family {
			return nil, wop.Errorf(wop.CodeNotFound, "no family %s", req.GetFamily())
		}
		return s.aiInvoke(req.GetMethod(), req.GetPayload())
	}
	if s.family == familyMCP {
		if req.GetFamily() != mcp.Family {
			return nil, wop.Errorf(wop.CodeNotFound, "no family %s", req.GetFamily())
		}
		return s.mcpInvoke(req.GetMethod(), req.GetPayload())
	}
	if s.family == familyPromptLibrary {
		if req.GetFamily() != promptlibrary.Family {
			return nil, wop.Errorf(wop.CodeNotFound, "no family %s", req.GetFamily())
		}
		return s.plInvoke(req.GetMethod(), req.GetPayload())
	}
	s.mu.Lock()
	configured, after := s.configured, s.afterRefusal
	if channel {
		after = -1
	} else if after >= 0 {
		s.afterRefusal++
	}
	s.mu.Unlock()
	if !configured && !s.breaks("serve-unconfigured") {
		return nil, wop.Errorf(wop.CodeUnavailable, "not configured yet")
	}
	switch {
	case after == 0 && s.breaks("after-deadline"):
		return nil, wop.Errorf(wop.CodeInternal, "still upset about the last deadline")
	case after == 1 && s.breaks("keeps-serving"):
		os.Exit(3)
	}
	call := wire.CallContextFromProto(req.GetCall())
	if !call.Deadline.IsZero() && time.Now().After(call.Deadline) && !s.breaks("call-deadline") {
		s.mu.Lock()
		s.afterRefusal = 0
		s.mu.Unlock()
		return nil, wop.Errorf(wop.CodeDeadlineExceeded, "the call's deadline passed")
	}
	if req.GetFamily() != family {
		if s.breaks("unknown-family") {
			return []byte(`{}`), nil
		}
		return nil, wop.Errorf(wop.CodeNotFound, "no family %s", req.GetFamily())
	}
	if req.GetMethod() == "fail" {
		// A vendor code by OpenWOP's grammar is org.name with one dot.
		if s.breaks("vendor-code") {
			return nil, wop.Errorf("test.bad.failed", "failed on purpose")
		}
		return nil, wop.Errorf("test.failed", "failed on purpose")
	}
	if req.GetMethod() != "echo" && req.GetMethod() != "other" {
		if s.breaks("unknown-method") {
			return nil, wop.Errorf(wop.CodeInternal, "no idea")
		}
		return nil, wop.Errorf(wop.CodeNotFound, "no method %s", req.GetMethod()).
			WithCapability("host." + family + "." + req.GetMethod())
	}
	if !json.Valid(req.GetPayload()) && !s.breaks("malformed-payload") {
		return nil, wop.Errorf(wop.CodeValidation, "the payload is not JSON")
	}
	if req.GetMethod() == "other" && s.breaks("invoke") {
		return []byte("not json"), nil
	}
	if !json.Valid(req.GetPayload()) {
		return []byte(`{}`), nil
	}
	return req.GetPayload(), nil
}
