package loader

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/plugin"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// rpcTimeout bounds each start-up RPC (Describe, ConfigSchema, Configure),
// so a wedged plugin fails its phase instead of hanging the host.
const rpcTimeout = 30 * time.Second

// Capability is a started capability plugin.
type Capability struct {
	name string
	proc *process
	conn *hostwire.CapabilityConn
	opts Options
	// direct is set once Describe said the plugin serves a direct
	// channel.
	direct bool
	// relay carries the host's calls to the plugin on its channel, once
	// configured with one; nil, they go on the gRPC connection.
	relay atomic.Pointer[hostwire.Relay]
}

// Description is what a plugin says about itself.
type Description = hostwire.Description

// FamilyDescription is one family a plugin can serve.
type FamilyDescription = hostwire.FamilyDescription

// StartCapability execs the opened plugin binary exe, completes the
// handshake and negotiates the protocol. It closes exe once the process
// has started. The error is a *PhaseError naming the phase.
func StartCapability(name string, exe *Executable, opts Options) (*Capability, error) {
	proc, rpc, err := startProcess(name, exe, opts)
	if err != nil {
		return nil, &PhaseError{Phase: "started", Err: err}
	}
	raw, err := rpc.Dispense(hostwire.KindCapability)
	if err != nil {
		proc.kill()
		return nil, &PhaseError{Phase: "negotiated", Err: err}
	}
	conn, ok := raw.(*hostwire.CapabilityConn)
	if !ok {
		proc.kill()
		return nil, &PhaseError{Phase: "negotiated", Err: fmt.Errorf("unexpected plugin client %T", raw)}
	}
	return &Capability{name: name, proc: proc, conn: conn, opts: opts}, nil
}

// Describe asks the plugin what it serves.
func (c *Capability) Describe(ctx context.Context) (*Description, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := c.conn.Client.Describe(ctx, &wophostv1.DescribeRequest{})
	if err != nil {
		return nil, &PhaseError{Phase: "described", Err: c.proc.callError("Describe", c.Exited(), err)}
	}
	d := hostwire.DescriptionFromProto(resp)
	c.direct = d.DirectChannel
	return d, nil
}

// Described tells a restarted process what its binary described at the
// first start, which a restart does not ask again: whether it serves a
// direct channel.
func (c *Capability) Described(d *Description) { c.direct = d.DirectChannel }

// ConfigSchema fetches the schema of the plugin's config block.
func (c *Capability) ConfigSchema(ctx context.Context) (schema.Block, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := c.conn.Client.ConfigSchema(ctx, &wophostv1.ConfigSchemaRequest{})
	if err != nil {
		err = c.proc.callError("ConfigSchema", c.Exited(), err)
		if _, exited := err.(*ExitError); !exited {
			err = fmt.Errorf("config schema: %w", err)
		}
		return schema.Block{}, &PhaseError{Phase: "described", Err: err}
	}
	var s schema.Block
	if len(resp.GetSchema()) > 0 {
		if err := json.Unmarshal(resp.GetSchema(), &s); err != nil {
			return schema.Block{}, &PhaseError{Phase: "described", Err: fmt.Errorf("config schema is not valid JSON: %w", err)}
		}
	}
	return s, nil
}

// ConfigDiagnostic is a problem the plugin found in its decoded config.
type ConfigDiagnostic struct {
	Summary, Detail string
	Path            []string
}

// ConfigureResult is the outcome of Configure.
type ConfigureResult struct {
	// Facets maps each family to its facets under this configuration.
	Facets map[string]map[string]json.RawMessage
	// Details maps each family to the JSON object the plugin lists about
	// it under this configuration, never advertised.
	Details map[string]json.RawMessage
	// Diagnostics, when not empty, mean the plugin refused the config.
	Diagnostics []ConfigDiagnostic
	// Warnings are problems the plugin serves despite.
	Warnings []ConfigDiagnostic
	// Direct is the plugin's direct channel under this configuration, nil
	// when it serves none or Options.DirectChannels is off.
	Direct *DirectChannel
}

// DirectChannel is where a plugin process serves its direct channel and
// the key of the grants it accepts since its last Configure.
type DirectChannel struct {
	Endpoint *wophostv1.DirectChannelEndpoint
	Key      []byte
}

// Configure sends the decoded config, the plugin's state directory and
// storage settings, and serves hostServices to the plugin on the broker.
// rules are those of the families it serves, which its direct channel
// holds the calls it takes to.
func (c *Capability) Configure(ctx context.Context, config json.RawMessage, stateDir string, storage plugin.Storage, hostServices wophostv1.HostServicesServer, rules map[string]admission.Rules) (*ConfigureResult, error) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	var brokerID uint32
	if hostServices != nil {
		brokerID = hostwire.ServeHostServices(c.conn.Broker, hostServices, c.opts.MaxMessageBytes)
	}
	req := &wophostv1.ConfigureRequest{
		Config: config, HostServicesBrokerId: brokerID, StateDir: c.proc.stateDirFor(stateDir), HostVersion: c.opts.HostVersion,
		Storage: plugin.StorageToProto(storage),
	}
	var key []byte
	if c.direct && c.opts.DirectChannels {
		dir, err := c.proc.directDir()
		if err != nil {
			return nil, &PhaseError{Phase: "configured", Err: err}
		}
		// A fresh key each time: the grants of an earlier configuration
		// stop working.
		key = hostwire.NewGrantKey()
		req.DirectChannel = &wophostv1.DirectChannelSettings{
			GrantKey: key, SocketDir: dir, MaxConcurrentCalls: int32(c.opts.MaxConcurrentCalls), Capability: c.name,
			Rules: hostwire.RulesToProto(rules), MaxUnreadBytes: int64(c.opts.DirectMaxUnreadBytes),
		}
	}
	resp, err := c.conn.Client.Configure(ctx, req)
	if err != nil {
		return nil, &PhaseError{Phase: "configured", Err: c.proc.callError("Configure", c.Exited(), err)}
	}
	out := &ConfigureResult{Facets: map[string]map[string]json.RawMessage{}, Details: map[string]json.RawMessage{}}
	if ep := resp.GetDirectChannel(); key != nil && ep.GetAddress() != "" {
		// A process keeps its channel across configurations: only the
		// key is new.
		if r := c.relay.Load(); r != nil {
			r.Rekey(key)
		} else {
			c.relay.Store(hostwire.NewRelay(ep, key, c.opts.MaxMessageBytes))
		}
		out.Direct = &DirectChannel{Endpoint: ep, Key: key}
	}
	for _, d := range resp.GetDiagnostics() {
		out.Diagnostics = append(out.Diagnostics, ConfigDiagnostic{Summary: d.GetSummary(), Detail: d.GetDetail(), Path: d.GetPath()})
	}
	for _, d := range resp.GetWarnings() {
		out.Warnings = append(out.Warnings, ConfigDiagnostic{Summary: d.GetSummary(), Detail: d.GetDetail(), Path: d.GetPath()})
	}
	for fam, raw := range resp.GetFacets() {
		facets := map[string]json.RawMessage{}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &facets); err != nil {
				return nil, &PhaseError{Phase: "configured", Err: fmt.Errorf("facets of %s are not a JSON object: %w", fam, err)}
			}
		}
		out.Facets[fam] = facets
	}
	for fam, raw := range resp.GetDetails() {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, &PhaseError{Phase: "configured", Err: fmt.Errorf("details of %s are not a JSON object", fam)}
		}
		out.Details[fam] = raw
	}
	return out, nil
}

// Invoke sends one call to the plugin: on its channel when it serves
// one, else (or when the channel cannot take the call) on its gRPC
// connection.
func (c *Capability) Invoke(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
	if c.proc.exited() {
		return nil, wop.Errorf(wop.CodeUnavailable, "plugin %s has exited", c.proc.name).
			WithCapability("host." + family + "." + method).WithRetryable(true)
	}
	req := &wophostv1.InvokeRequest{
		Family: family, Method: method, Payload: payload, Call: hostwire.CallContextToProto(call),
	}
	if r := c.relay.Load(); r != nil {
		if out, sent, err := r.Invoke(ctx, req); sent {
			if err != nil {
				return nil, c.callError(wop.AsError(err), family, method)
			}
			return out, nil
		}
	}
	resp, err := c.conn.Client.Invoke(ctx, req)
	if err != nil {
		return nil, c.callError(hostwire.FromStatus(err), family, method)
	}
	return resp.GetResult(), nil
}

// callError names the capability in a failed call's error and says when
// the plugin exited during it.
func (c *Capability) callError(we *wop.Error, family, method string) *wop.Error {
	if we.Capability == "" {
		we = we.WithCapability("host." + family + "." + method)
	}
	if we.Code == wop.CodeUnavailable && c.proc.exited() {
		we.Message = fmt.Sprintf("plugin %s exited during the call: %s", c.proc.name, we.Message)
	}
	return we
}

// EndRun ends a run on the plugin's direct channel: its grants are
// refused from now on, and the answer holds the calls the run made there.
// It goes on the channel itself when the plugin speaks the framing's
// version 2, else (or when the channel cannot take it) on gRPC.
func (c *Capability) EndRun(ctx context.Context, runID string, deadline time.Time) (*wophostv1.EndRunResponse, error) {
	req := &wophostv1.EndRunRequest{RunId: runID, DeadlineUnixNano: deadline.UnixNano()}
	if r := c.relay.Load(); r != nil {
		if resp, sent, err := r.EndRun(ctx, req); sent {
			if err != nil {
				return nil, wop.AsError(err)
			}
			return resp, nil
		}
	}
	resp, err := c.conn.Client.EndRun(ctx, req)
	if err != nil {
		return nil, hostwire.FromStatus(err)
	}
	return resp, nil
}

// Exited is closed when the plugin process exits.
func (c *Capability) Exited() <-chan struct{} { return c.conn.Exited.Done() }

// PID returns the plugin process's id (for measurements such as its CPU
// time under /proc), or 0 when it is not known.
func (c *Capability) PID() int { return c.proc.pid() }

// Kill stops the plugin process and its process group.
func (c *Capability) Kill() { c.proc.kill() }

// LastWords is the end of what the plugin process wrote to stderr (the
// start of a panic, or its last lines), on one line; "" when it wrote
// nothing. Read it once the process has exited to say why.
func (c *Capability) LastWords() string { return c.proc.lastWords() }

// Abort kills the plugin process and its process group at once, without
// asking it to exit first: for a process that no longer answers.
func (c *Capability) Abort() { c.proc.stop(false) }

// CheckHealth asks the plugin the protocol's health check within ctx: nil
// when it answers SERVING.
func (c *Capability) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, c.conn.Health, "plugin")
}

// checkHealth asks client the protocol's health check within ctx, for a
// process of kind (plugin, pack): nil when it answers SERVING.
func checkHealth(ctx context.Context, client healthpb.HealthClient, kind string) error {
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: hostwire.HealthService})
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health check: the %s answers %s", kind, s)
	}
	return nil
}
