package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/wophost/wophost/internal/pgstore"
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

// Ceilings of whole-number settings: each keeps the value inside the Go
// type it decodes into, and a run's timeout inside a time.Duration.
const (
	maxCount     = math.MaxInt32
	maxTimeoutMs = 30 * 24 * 60 * 60 * 1000 // 30 days
	maxTokens    = 1 << 53                  // the largest integer a JSON number holds exactly
)

// count is a whole-number attribute from lo to hi.
func count(name string, lo, hi float64, desc string) schema.Attribute {
	return schema.Attribute{Name: name, Type: schema.Number, Whole: true, Min: schema.Bound(lo), Max: schema.Bound(hi), Description: desc}
}

func limitsSchema() schema.Block {
	return schema.Block{Attributes: []schema.Attribute{
		count("turns", 1, maxCount, "generate calls per run"),
		count("tool_calls", 0, maxCount, "tool calls per run, handoffs included"),
		count("delegation_depth", 0, maxCount, "how deep a chain of handoffs may go"),
		count("timeout_ms", 1, maxTimeoutMs, "wall-clock time of a run, in milliseconds"),
		count("token_budget", 1, maxTokens, "input plus output tokens per run"),
	}}
}

// agentrt serves the family from a runtime.Service built at Configure.
type agentrt struct {
	mu    sync.RWMutex
	store store.Backend
	svc   *runtime.Service
}

// The plugin lets the operator list its instances; without this, a
// changed signature would drop the method from the family unnoticed.
var _ agentruntime.InstanceLister = (*agentrt)(nil)

func newPlugin() *plugin.Plugin {
	a := &agentrt{}
	family := agentruntime.NewFamily(a)
	family.Status, family.Since, family.Witness = wop.StatusStable, "2.0", wop.WitnessClaimsCheck
	// Agents cannot think without aiEnvelope; prompts and tools are used
	// when an agent's manifest asks for them.
	family.Needs = []string{wop.FamilyAIEnvelope}
	family.Uses = []string{wop.FamilyAIEnvelope, wop.FamilyPromptLibrary, wop.FamilyMCP}
	return &plugin.Plugin{
		Name:    "wophost-agentrt",
		Version: "0.1.0",
		ConfigSchema: schema.Block{
			Attributes: []schema.Attribute{
				{Name: "store_file", Type: schema.String, Description: `database file, relative to the plugin's state directory (default "agents.db"); the embedded storage backend only`},
				count("mailbox_capacity", 1, maxCount, "queued messages per agent instance before messageSend answers mailbox_full (default 64)"),
				count("spawn_quota", 0, maxCount, "agent instances the store may hold; 0 for no bound (default 256)"),
				count("max_rounds", 1, maxCount, "largest consensus maxRounds accepted (default 5)"),
				count("max_message_bytes", 1, maxCount, "largest messageSend content, as compact JSON (default 65536)"),
				count("max_candidates", 1, maxCount, "most agents in one delegate or consensus call (default 32)"),
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
		Families:     []*plugin.Family{family},
	}
}

func (a *agentrt) configure(ctx context.Context, req *plugin.ConfigureRequest) error {
	var c config
	if err := req.Decode(&c); err != nil {
		return err
	}
	settings := settingsFrom(&c)
	st, err := openBackend(ctx, req, c.StoreFile)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store != nil {
		_ = a.store.Close()
	}
	a.store, a.svc = st, runtime.New(st, settings)
	return nil
}

// openBackend opens the store the host's storage settings choose: the
// SQLite file under the state directory (embedded), or the plugin's schema
// of the database every host shares (postgres), where store_file has no
// meaning.
func openBackend(ctx context.Context, req *plugin.ConfigureRequest, storeFile *string) (store.Backend, error) {
	if req.Storage.Backend == plugin.StoragePostgres {
		if storeFile != nil {
			req.Warn([]string{"store_file"}, "store_file is not used",
				"the host's storage backend is postgres: agents, tasks and mailboxes are kept in the database, not in a file")
		}
		pool, err := pgstore.Open(ctx, req.Storage, req.Storage.Schema, store.Migrations())
		if err != nil {
			return nil, fmt.Errorf("open the agent store: %w", pgstore.ConfigureError(err))
		}
		st, err := store.OpenPostgres(ctx, pool, store.Options{})
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("open the agent store: %w", pgstore.ConfigureError(err))
		}
		return st, nil
	}
	file := "agents.db"
	if storeFile != nil {
		file = *storeFile
	}
	if file == "" || filepath.IsAbs(file) || !filepath.IsLocal(file) {
		return nil, &plugin.ConfigError{Path: []string{"store_file"}, Summary: "Invalid store_file",
			Detail: "store_file must be a relative path inside the plugin's state directory"}
	}
	st, err := store.Open(ctx, filepath.Join(req.StateDir, file), store.Options{})
	if err != nil {
		return nil, wop.Errorf(wop.CodeUnavailable, "%v", err)
	}
	return st, nil
}

// settingsFrom applies the config to the defaults. The schema's
// constraints (whole numbers, each with its least value) were checked
// before Configure.
func settingsFrom(c *config) runtime.Settings {
	s := runtime.DefaultSettings()
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.MailboxCapacity, c.MailboxCapacity)
	set(&s.SpawnQuota, c.SpawnQuota)
	set(&s.MaxRounds, c.MaxRounds)
	set(&s.MaxMessageBytes, c.MaxMessageBytes)
	set(&s.MaxCandidates, c.MaxCandidates)
	s.Defaults = applyLimits(s.Defaults, c.Limits)
	s.Ceiling = applyLimits(loop.Limits{}, c.MaxLimits)
	return s
}

func applyLimits(l loop.Limits, c *limitsConfig) loop.Limits {
	if c == nil {
		return l
	}
	if v := c.Turns; v != nil {
		l.Turns = *v
	}
	if v := c.ToolCalls; v != nil {
		l.ToolCalls = *v
	}
	if v := c.DelegationDepth; v != nil {
		l.DelegationDepth = *v
	}
	if v := c.TimeoutMs; v != nil {
		l.Timeout = time.Duration(*v) * time.Millisecond
	}
	if v := c.TokenBudget; v != nil {
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

// Spawn implements agentruntime.Server.
func (a *agentrt) Spawn(ctx context.Context, _ *plugin.Request, in *agentruntime.SpawnRequest) (*agentruntime.SpawnResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.Spawn(ctx, in)
}

// Delegate implements agentruntime.Server.
func (a *agentrt) Delegate(ctx context.Context, req *plugin.Request, in *agentruntime.DelegateRequest) (*agentruntime.DelegateResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.Delegate(ctx, req.Host, in)
}

// Consensus implements agentruntime.Server.
func (a *agentrt) Consensus(ctx context.Context, req *plugin.Request, in *agentruntime.ConsensusRequest) (*agentruntime.ConsensusResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.Consensus(ctx, req.Host, in)
}

// MessageSend implements agentruntime.Server.
func (a *agentrt) MessageSend(ctx context.Context, _ *plugin.Request, in *agentruntime.MessageSendRequest) (*agentruntime.MessageSendResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.MessageSend(ctx, in)
}

// Instances implements agentruntime.InstanceLister.
func (a *agentrt) Instances(ctx context.Context, _ *plugin.Request, in *agentruntime.InstancesRequest) (*agentruntime.InstancesResult, error) {
	svc, done, err := a.service()
	if err != nil {
		return nil, err
	}
	defer done()
	return svc.Instances(ctx, in)
}
