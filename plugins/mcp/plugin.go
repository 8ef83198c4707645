package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/plugins/mcp/client"
	"github.com/wophost/wophost/sdk/families/aienvelope"
	"github.com/wophost/wophost/sdk/families/mcp"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// version is the plugin's version, also sent as clientInfo.version.
const version = "0.1.0"

// revisionsRefreshedAt is the day the revision list was last checked
// against the MCP specification, advertised as refreshedAt.
const revisionsRefreshedAt = "2026-11-29"

// mcpPlugin holds one client per configured server.
type mcpPlugin struct {
	// ai tells the servers' policies whether sampling can be answered.
	ai *aiEnvelopeWatch

	mu      sync.RWMutex
	cfg     *config
	clients map[string]*client.Client
}

func newPlugin() *plugin.Plugin {
	p := &mcpPlugin{ai: newAIEnvelopeWatch(), cfg: &config{maxRounds: defaultMaxRounds}, clients: map[string]*client.Client{}}
	family := mcp.NewFamily(p)
	family.Status, family.Since, family.Witness = wop.StatusStable, "2.0", wop.WitnessSeamGated
	family.Facets, family.Details = p.facets, p.details
	// Sampling requests are answered through aiEnvelope when the host
	// advertises it.
	family.Uses = []string{aienvelope.Family}
	return &plugin.Plugin{
		Name:         "wophost-mcp",
		Version:      version,
		ConfigSchema: configSchema(),
		Configure:    p.configure,
		Shutdown:     p.shutdown,
		Families:     []*plugin.Family{family},
	}
}

func (p *mcpPlugin) configure(_ context.Context, req *plugin.ConfigureRequest) error {
	var rc rawConfig
	if err := req.Decode(&rc); err != nil {
		return err
	}
	cfg, errs := validate(&rc)
	if len(errs) > 0 {
		return errs
	}
	logger := req.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	clients := make(map[string]*client.Client, len(cfg.servers))
	for id, s := range cfg.servers {
		l := logger.Named("server").With("server", id)
		if s.unstartable != "" {
			// One server that cannot start takes nothing else down: it is
			// configured like the others, and its calls fail
			// upstream_unavailable with the reason until it can start.
			l.Warn("MCP server cannot be started; its calls fail with upstream_unavailable until it can", "reason", s.unstartable)
			req.Warn([]string{"server", id, "command"}, fmt.Sprintf("MCP server %q cannot be started", id),
				s.unstartable+"; its calls fail with upstream_unavailable until its executable can be started, the other servers are not affected")
		}
		c, err := client.New(client.Options{
			Stdio:           s.stdio,
			HTTP:            s.http,
			CallTimeout:     s.timeout,
			DiscoverTimeout: s.discoverTimeout,
			MinimumRevision: s.minimumRevision,
			MaxRounds:       cfg.maxRounds,
			MaxMessageBytes: cfg.maxMessage,
			ClientInfo:      json.RawMessage(`{"name":"wophost-mcp","version":"` + version + `"}`),
			Inputs:          &policy{server: s, ai: p.ai, logger: l},
			Logger:          l,
		})
		if err != nil {
			for _, c := range clients {
				c.Close()
			}
			return &plugin.ConfigError{Path: []string{"server", id}, Summary: "Invalid server", Detail: err.Error()}
		}
		clients[id] = c
	}
	p.mu.Lock()
	old := p.clients
	p.cfg, p.clients = cfg, clients
	p.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
	return nil
}

func (p *mcpPlugin) shutdown() {
	p.mu.Lock()
	old := p.clients
	p.clients = map[string]*client.Client{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range old {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Close()
		}()
	}
	wg.Wait()
}

// facets is the family's advertisement under the current configuration.
// OpenWOP's client facet is the constant true: the servers it reaches are
// listed in details, never advertised.
func (p *mcpPlugin) facets() map[string]any {
	p.mu.RLock()
	defer p.mu.RUnlock()
	minimum := client.RevisionModern
	for _, s := range p.cfg.servers {
		if s.minimumRevision < minimum {
			minimum = s.minimumRevision
		}
	}
	if len(p.cfg.servers) == 0 {
		minimum = client.RevisionLegacy
	}
	return map[string]any{
		mcp.FacetClient:    true,
		"revisions":        client.Revisions,
		"preferredVersion": client.RevisionModern,
		"minimumRevision":  minimum,
		"refreshedAt":      revisionsRefreshedAt,
		"mrtr":             map[string]int{"maxRounds": p.cfg.maxRounds},
	}
}

// details lists the configured servers, sorted, with the capability
// (GET /v1/plugins): the host checks agent manifests against them.
func (p *mcpPlugin) details() map[string]any {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ids := make([]string, 0, len(p.cfg.servers))
	for id := range p.cfg.servers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return map[string]any{"servers": ids}
}

// server finds the client for serverId or fails with not_found.
func (p *mcpPlugin) server(id string) (*client.Client, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	c, ok := p.clients[id]
	if !ok {
		return nil, wop.Errorf(wop.CodeNotFound, "no MCP server %q is configured", id)
	}
	return c, nil
}

// CallTool implements mcp.Server.
func (p *mcpPlugin) CallTool(ctx context.Context, req *plugin.Request, in *mcp.CallToolRequest) (json.RawMessage, error) {
	c, err := p.server(in.ServerID)
	if err != nil {
		return nil, err
	}
	res, err := c.CallTool(withCaller(ctx, req.Host), in.Name, in.Arguments)
	return res, rejection(ctx, in.ServerID, err)
}

// ListTools implements mcp.Server.
func (p *mcpPlugin) ListTools(ctx context.Context, req *plugin.Request, in *mcp.ListToolsRequest) (json.RawMessage, error) {
	c, err := p.server(in.ServerID)
	if err != nil {
		return nil, err
	}
	res, err := c.ListTools(withCaller(ctx, req.Host), in.Cursor)
	return res, rejection(ctx, in.ServerID, err)
}

// ReadResource implements mcp.Server.
func (p *mcpPlugin) ReadResource(ctx context.Context, req *plugin.Request, in *mcp.ReadResourceRequest) (json.RawMessage, error) {
	c, err := p.server(in.ServerID)
	if err != nil {
		return nil, err
	}
	res, err := c.ReadResource(withCaller(ctx, req.Host), in.URI)
	return res, rejection(ctx, in.ServerID, err)
}

// ServerHealth implements mcp.Server.
func (p *mcpPlugin) ServerHealth(ctx context.Context, req *plugin.Request, in *mcp.ServerHealthRequest) (*mcp.ServerHealthResult, error) {
	c, err := p.server(in.ServerID)
	if err != nil {
		return nil, err
	}
	h := c.Health(withCaller(ctx, req.Host))
	return &mcp.ServerHealthResult{ServerID: in.ServerID, Status: h.Status, CheckedAt: h.CheckedAt,
		ProtocolVersion: h.ProtocolVersion, Discover: h.Discover}, nil
}

// rejection maps a client error to the only codes a call may reject with:
// mcp_error for the server's JSON-RPC error (its object unaltered in
// details.error), upstream_unavailable for everything else. When the
// call's own context ended first (its deadline or a cancellation), that
// is what the caller learns: the server did not fail, the caller's budget
// ran out, and retrying within it would not help.
func rejection(ctx context.Context, serverID string, err error) error {
	if err == nil {
		return nil
	}
	var rpc *client.RPCError
	if errors.As(err, &rpc) {
		return wop.Errorf(wop.CodeMCPError, "MCP server %q answered with error %d: %s", serverID, rpc.Code, rpc.Message).
			WithDetails(map[string]json.RawMessage{"error": rpc.Raw})
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return wop.Errorf(wop.CodeDeadlineExceeded, "MCP server %q: the call's deadline passed before the server answered", serverID)
	case context.Canceled:
		return wop.Errorf(wop.CodeCancelled, "MCP server %q: the call was cancelled before the server answered", serverID)
	}
	if errors.Is(err, client.ErrRoundsExhausted) {
		return wop.Errorf(wop.CodeUpstreamUnavailable, "MCP server %q: %v (max_rounds)", serverID, err).WithRetryable(true)
	}
	return wop.Errorf(wop.CodeUpstreamUnavailable, "MCP server %q: %v", serverID, err).WithRetryable(true)
}
