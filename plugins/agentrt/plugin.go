package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/wophost/wophost/plugins/agentrt/loop"
	"github.com/wophost/wophost/plugins/agentrt/runtime"
	"github.com/wophost/wophost/plugins/agentrt/store"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// limitsConfig is a limits block: the defaults of every run, or their
// ceiling.
type limitsConfig struct {
	Turns           *int   `json:"turns"`
	ToolCalls       *int   `json:"tool_calls"`
	DelegationDepth *int   `json:"delegation_depth"`
	TimeoutMs       *int64 `json:"timeout_ms"`
	TokenBudget     *int64 `json:"token_budget"`
}

// config is the plugin's config block.
type config struct {
	StoreFile       *string       `json:"store_file"`
	MailboxCapacity *int          `json:"mailbox_capacity"`
	SpawnQuota      *int          `json:"spawn_quota"`
	MaxRounds       *int          `json:"max_rounds"`
	MaxMessageBytes *int          `json:"max_message_bytes"`
	MaxCandidates   *int          `json:"max_candidates"`
	Limits          *limitsConfig `json:"limits"`
	MaxLimits       *limitsConfig `json:"max_limits"`
}

func limitsSchema() schema.Block {
	return schema.Block{Attributes: []schema.Attribute{
		{Name: "turns", Type: schema.Number, Description: "generate calls per run"},
		{Name: "tool_calls", Type: schema.Number, Description: "tool calls per run, handoffs included"},
		{Name: "delegation_depth", Type: schema.Number, Description: "how deep a chain of handoffs may go"},
		{Name: "timeout_ms", Type: schema.Number, Description: "wall-clock time of a run, in milliseconds"},
		{Name: "token_budget", Type: schema.Number, Description: "input plus output tokens per run"},
	}}
}

// agentrt serves the family from a runtime.Service built at Configure.
type agentrt struct {
	mu    sync.RWMutex
	store *store.Store
	svc   *runtime.Service
}

func newPlugin() *plugin.Plugin {
	a := &agentrt{}
	return &plugin.Plugin{
		Name:    "wophost-agentrt",
		Version: "0.1.0",
		ConfigSchema: schema.Block{
			Attributes: []schema.Attribute{
				{Name: "store_file", Type: schema.String, Description: `database file, relative to the plugin's state directory (default "agents.db")`},
				{Name: "mailbox_capacity", Type: schema.Number, Description: "queued messages per agent instance before messageSend answers mailbox_full (default 64)"},
				{Name: "spawn_quota", Type: schema.Number, Description: "agent instances the store may hold; 0 for no bound (default 256)"},
				{Name: "max_rounds", Type: schema.Number, Description: "largest consensus maxRounds accepted (default 5)"},
				{Name: "max_message_bytes", Type: schema.Number, Description: "largest messageSend content, as compact JSON (default 65536)"},
				{Name: "max_candidates", Type: schema.Number, Description: "most agents in one delegate or consensus call (default 32)"},
			},
			Blocks: []schema.NestedBlock{
				{TypeName: "limits", Nesting: schema.NestingSingle, Block: limitsSchema(),
					Description: "limits of a run where the agent's manifest sets none (defaults: 10 turns, 20 tool calls, depth 2, 120000 ms, 100000 tokens)"},
				{TypeName: "max_limits", Nesting: schema.NestingSingle, Block: limitsSchema(),
					Description: "ceilings no manifest or spawn config can exceed; unset means no ceiling"},
			},
		},
		Configure:    a.configure,
		Shutdown:     a.shutdown,
		SingleWriter: true,
		Families: []*plugin.Family{{
			Name:    agentruntime.Family,
			Status:  "stable",
			Since:   "2.0",
			Witness: "claims-check",
			Methods: map[string]plugin.Handler{
				agentruntime.MethodSpawn:       plugin.Typed(a.spawn),
				agentruntime.MethodDelegate:    plugin.Typed(a.delegate),
				agentruntime.MethodConsensus:   plugin.Typed(a.consensus),
				agentruntime.MethodMessageSend: plugin.Typed(a.messageSend),
			},
			// Agents cannot think without aiEnvelope; prompts and tools
			// are used when an agent's manifest asks for them.
			Needs: []string{wop.FamilyAIEnvelope},
			Uses:  []string{wop.FamilyAIEnvelope, wop.FamilyPromptLibrary, wop.FamilyMCP},
		}},
	}
}

func (a *agentrt) configure(ctx context.Context, req *plugin.ConfigureRequest) error {
	var c config
	if err := req.Decode(&c); err != nil {
		return err
	}
	settings, err := settingsFrom(&c)
	if err != nil {
		return err
	}
	file := "agents.db"
	if c.StoreFile != nil {
		file = *c.StoreFile
	}
	if file == "" || filepath.IsAbs(file) || !filepath.IsLocal(file) {
		return &plugin.ConfigError{Path: []string{"store_file"}, Summary: "Invalid store_file",
			Detail: "store_file must be a relative path inside the plugin's state directory"}
	}
	st, err := store.Open(ctx, filepath.Join(req.StateDir, file), store.Options{})
	if err != nil {
		return wop.Errorf(wop.CodeUnavailable, "%v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store != nil {
		_ = a.store.Close()
	}
	a.store, a.svc = st, runtime.New(st, settings)
	return nil
}

// settingsFrom applies the config to the defaults, refusing values out of
// range with the attribute's path.
func settingsFrom(c *config) (runtime.Settings, error) {
	s := runtime.DefaultSettings()
	var errs plugin.ConfigErrors
	setInt := func(dst *int, v *int, name string, lo int) {
		if v == nil {
			return
		}
		if *v < lo {
			errs = append(errs, &plugin.ConfigError{Path: []string{name}, Summary: "Invalid " + name, Detail: fmt.Sprintf("it must be at least %d", lo)})
			return
		}
		*dst = *v
	}
	setInt(&s.MailboxCapacity, c.MailboxCapacity, "mailbox_capacity", 1)
	setInt(&s.SpawnQuota, c.SpawnQuota, "spawn_quota", 0)
	setInt(&s.MaxRounds, c.MaxRounds, "max_rounds", 1)
	setInt(&s.MaxMessageBytes, c.MaxMessageBytes, "max_message_bytes", 1)
	setInt(&s.MaxCandidates, c.MaxCandidates, "max_candidates", 1)
	s.Defaults = applyLimits(s.Defaults, c.Limits, "limits", &errs)
	s.Ceiling = applyLimits(loop.Limits{}, c.MaxLimits, "max_limits", &errs)
	if len(errs) > 0 {
		return s, errs
	}
	return s, nil
}

func applyLimits(l loop.Limits, c *limitsConfig, block string, errs *plugin.ConfigErrors) loop.Limits {
	if c == nil {
		return l
	}
	check := func(name string, v, lo int64) bool {
		if v < lo {
			*errs = append(*errs, &plugin.ConfigError{Path: []string{block, name}, Summary: "Invalid " + name,
				Detail: fmt.Sprintf("it must be at least %d", lo)})
			return false
		}
		return true
	}
	if v := c.Turns; v != nil && check("turns", int64(*v), 1) {
		l.Turns = *v
	}
	if v := c.ToolCalls; v != nil && check("tool_calls", int64(*v), 0) {
		l.ToolCalls = *v
	}
	if v := c.DelegationDepth; v != nil && check("delegation_depth", int64(*v), 0) {
		l.DelegationDepth = *v
	}
	if v := c.TimeoutMs; v != nil && check("timeout_ms", *v, 1) {
		l.Timeout = time.Duration(*v) * time.Millisecond
	}
	if v := c.TokenBudget; v != nil && check("token_budget", *v, 1) {
		l.TokenBudget = *v
	}
	return l
}

func (a *agentrt) shutdown() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store != nil {
		_ = a.store.Close()
		a.store, a.svc = nil, nil
	}
}

// service returns the configured service and a release func that must be
// called when the request is done: the read lock keeps a reconfiguration
// from closing the store under a running call.
func (a *agentrt) service() (*runtime.Service, func(), error) {
	a.mu.RLock()
	if a.svc == nil {
		a.mu.RUnlock()
		return nil, nil, wop.Errorf(wop.CodeUnavailable, "the agent runtime is shut down").WithRetryable(true)
	}
	return a.svc, a.mu.RUnlock, nil
}

func (a *agentrt) spawn(ctx context.Context, _ *plugin.Request, in *agentruntime.SpawnRequest) (*agentruntime.SpawnResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.Spawn(ctx, in)
}

func (a *agentrt) delegate(ctx context.Context, req *plugin.Request, in *agentruntime.DelegateRequest) (*agentruntime.DelegateResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.Delegate(ctx, req.Host, in)
}

func (a *agentrt) consensus(ctx context.Context, req *plugin.Request, in *agentruntime.ConsensusRequest) (*agentruntime.ConsensusResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.Consensus(ctx, req.Host, in)
}

func (a *agentrt) messageSend(ctx context.Context, _ *plugin.Request, in *agentruntime.MessageSendRequest) (*agentruntime.MessageSendResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.MessageSend(ctx, in)
}
