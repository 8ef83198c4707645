package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wophost/wophost/plugins/aienvelope/provider"
	"github.com/wophost/wophost/plugins/aienvelope/provider/anthropic"
	"github.com/wophost/wophost/plugins/aienvelope/provider/local"
	"github.com/wophost/wophost/plugins/aienvelope/provider/openai"
	"github.com/wophost/wophost/plugins/aienvelope/retry"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
)

// Provider types accepted in a provider block.
const (
	typeLocal     = "local"
	typeOpenAI    = "openai"
	typeAnthropic = "anthropic"
)

// Defaults.
const (
	defaultWorkers    = 2
	defaultJobTimeout = 10 * time.Minute
	defaultOpenAIURL  = "https://api.openai.com/v1"
	// storeFile is the database inside the plugin's state directory.
	storeFile = "aienvelope.db"
	// defaultRetention keeps a week of finished envelopes: long enough for
	// any client's retries, short enough that a busy host's store stays a
	// bounded size.
	defaultRetention = 7 * 24 * time.Hour
	// minRetention is the shortest retention accepted. A pruned envelope's
	// key is free again, so a shorter one would break idempotency for
	// clients that retry the next day.
	minRetention = "24h"
	// keepForever is the retention value that turns pruning off.
	keepForever = "forever"
	// defaultJobLease is how long a host that stopped keeps its pending
	// envelopes from the other hosts (postgres backend).
	defaultJobLease = 30 * time.Second
	// minJobLease and maxJobLease bound job_lease: a shorter lease costs
	// a renewal more often than a busy database should see; a longer one
	// leaves a dead host's jobs waiting longer than anyone would.
	minJobLease = "1s"
	maxJobLease = "1h"
)

// configSchema is the plugin's config block.
func configSchema() schema.Block {
	dur := func(name, desc string) schema.Attribute {
		return schema.Attribute{Name: name, Type: schema.String, Duration: true, Description: desc + ` (a Go duration such as "500ms" or "1m")`}
	}
	// count is a whole number of at least one; the ceiling only keeps a
	// typo from becoming a million workers.
	count := func(name, desc string) schema.Attribute {
		return schema.Attribute{Name: name, Type: schema.Number, Whole: true, Min: schema.Bound(1), Max: schema.Bound(1e6), Description: desc}
	}
	return schema.Block{
		Attributes: []schema.Attribute{
			{Name: "default_provider", Type: schema.String, Description: `provider block used when a request names none (default: the only block, or "local")`},
		},
		Blocks: []schema.NestedBlock{
			{TypeName: "async", Nesting: schema.NestingSingle, Description: "asynchronous generation and the await facet", Block: schema.Block{
				Attributes: []schema.Attribute{
					{Name: "enabled", Type: schema.Bool, Description: "accept async requests and advertise the await facet (default false)"},
					count("workers", "async jobs run at once (default 2)"),
					dur("job_timeout", "longest an async job may run, retries included (default 10m)"),
					{Name: "job_workers", Type: schema.Number, Whole: true, Min: schema.Bound(0), Max: schema.Bound(1e6),
						Description: "postgres backend: async jobs this host runs at once, those it accepted and those it takes over from stopped hosts (default: workers); 0 makes a host that accepts jobs and leaves running them to the other hosts"},
					{Name: "job_lease", Type: schema.String, Duration: true, MinDuration: minJobLease, MaxDuration: maxJobLease,
						Description: `postgres backend: how long a pending job stays its host's without a renewal; a host renews every third of it, and another host takes a job over once it passed (a Go duration, default "30s")`},
				},
			}},
			{TypeName: "retry", Nesting: schema.NestingSingle, Description: "the retry policy for provider calls", Block: schema.Block{
				Attributes: []schema.Attribute{
					count("max_attempts", "attempts per call, the first included (default 3; 1 disables retries)"),
					dur("initial_backoff", "cap of the first backoff, doubled per attempt (default 500ms)"),
					dur("max_backoff", "largest backoff cap (default 20s)"),
					dur("max_retry_after", "longest server-requested wait honoured; a longer one ends the retries (default 60s)"),
				},
			}},
			{TypeName: "retention", Nesting: schema.NestingSingle, Description: "how long finished envelopes and their idempotency keys are kept", Block: schema.Block{
				Attributes: []schema.Attribute{
					{Name: "finished", Type: schema.String, Duration: true, MinDuration: minRetention, OneOf: []string{keepForever}, Description: `how long a completed or failed envelope is kept after it finished, at least 24h, or "forever" (default 168h); a request repeated after that runs again`},
				},
			}},
			{TypeName: "provider", Nesting: schema.NestingMap, Description: "a backend, named by its label", Block: schema.Block{
				Attributes: []schema.Attribute{
					{Name: "type", Type: schema.String, Required: true, OneOf: []string{typeLocal, typeOpenAI, typeAnthropic}, Description: "local | openai | anthropic"},
					{Name: "model", Type: schema.String, Description: "default model; a request's model overrides it"},
					{Name: "base_url", Type: schema.String, Description: "API root (openai: default https://api.openai.com/v1; anthropic: default https://api.anthropic.com)"},
					{Name: "api_key", Type: schema.String, Sensitive: true, Description: `API key, usually env("...")`},
					dur("timeout", "bound on one HTTP attempt (default none beyond the call's deadline)"),
					{Name: "rules", Type: schema.String, Description: `local: the rules document as JSON text, usually file("rules.json")`},
					{Name: "context_window", Type: schema.Number, Whole: true, Min: schema.Bound(1), Max: schema.Bound(1e6), Description: "openai: the server's context size in tokens; a prompt filling it draws a possible_truncation warning (set it for Ollama)"},
					{Name: "max_tokens", Type: schema.Number, Whole: true, Min: schema.Bound(1), Max: schema.Bound(1e6), Description: "anthropic: max_tokens when a request sets none (default 1024)"},
				},
			}},
		},
	}
}

type rawConfig struct {
	DefaultProvider *string                 `json:"default_provider"`
	Async           *rawAsync               `json:"async"`
	Retry           *rawRetry               `json:"retry"`
	Retention       *rawRetention           `json:"retention"`
	Provider        map[string]*rawProvider `json:"provider"`
}

type rawAsync struct {
	Enabled    *bool    `json:"enabled"`
	Workers    *float64 `json:"workers"`
	JobTimeout *string  `json:"job_timeout"`
	JobWorkers *float64 `json:"job_workers"`
	JobLease   *string  `json:"job_lease"`
}

type rawRetry struct {
	MaxAttempts    *float64 `json:"max_attempts"`
	InitialBackoff *string  `json:"initial_backoff"`
	MaxBackoff     *string  `json:"max_backoff"`
	MaxRetryAfter  *string  `json:"max_retry_after"`
}

type rawRetention struct {
	Finished *string `json:"finished"`
}

type rawProvider struct {
	Type          *string  `json:"type"`
	Model         *string  `json:"model"`
	BaseURL       *string  `json:"base_url"`
	APIKey        *string  `json:"api_key"`
	Timeout       *string  `json:"timeout"`
	Rules         *string  `json:"rules"`
	ContextWindow *float64 `json:"context_window"`
	MaxTokens     *float64 `json:"max_tokens"`
}

// backend is one configured provider block.
type backend struct {
	name, typ, model string
	p                provider.Provider
}

// settings is a checked configuration.
type settings struct {
	backends        map[string]*backend
	defaultProvider string
	policy          retry.Policy
	async           bool
	workers         int
	jobTimeout      time.Duration
	// jobWorkers and jobLease are the postgres backend's: the jobs run at
	// once (0: none, other hosts run them) and the lease of a pending row.
	// jobSettings names the ones the config set, for a warning when the
	// backend is embedded.
	jobWorkers  int
	jobLease    time.Duration
	jobSettings []string
	// retention is how long a finished envelope is kept; 0 keeps it
	// forever.
	retention time.Duration
}

// parseConfig checks the decoded config and builds the backends. Every
// problem is reported, each with the path of its attribute.
func parseConfig(req *plugin.ConfigureRequest) (*settings, error) {
	var rc rawConfig
	if err := req.Decode(&rc); err != nil {
		return nil, err
	}
	var errs plugin.ConfigErrors
	bad := func(detail string, path ...string) {
		errs = append(errs, &plugin.ConfigError{Path: path, Summary: "Invalid aiEnvelope configuration", Detail: detail})
	}
	// The schema's constraints (positive durations, whole numbers in
	// range) were checked before Configure; these only convert.
	duration := func(v *string, def time.Duration, path ...string) time.Duration {
		if v == nil {
			return def
		}
		d, err := time.ParseDuration(*v)
		if err != nil {
			bad(err.Error(), path...)
			return def
		}
		return d
	}
	integer := func(v *float64, def int) int {
		if v == nil {
			return def
		}
		return int(*v)
	}

	s := &settings{backends: map[string]*backend{}, workers: defaultWorkers, jobTimeout: defaultJobTimeout, retention: defaultRetention,
		jobWorkers: defaultWorkers, jobLease: defaultJobLease}
	if a := rc.Async; a != nil {
		s.async = a.Enabled != nil && *a.Enabled
		s.workers = integer(a.Workers, defaultWorkers)
		s.jobTimeout = duration(a.JobTimeout, defaultJobTimeout, "async", "job_timeout")
		s.jobWorkers = integer(a.JobWorkers, s.workers)
		s.jobLease = duration(a.JobLease, defaultJobLease, "async", "job_lease")
		if a.JobWorkers != nil {
			s.jobSettings = append(s.jobSettings, "job_workers")
		}
		if a.JobLease != nil {
			s.jobSettings = append(s.jobSettings, "job_lease")
		}
	}
	if r := rc.Retry; r != nil {
		s.policy.MaxAttempts = integer(r.MaxAttempts, retry.DefaultMaxAttempts)
		s.policy.InitialBackoff = duration(r.InitialBackoff, retry.DefaultInitialBackoff, "retry", "initial_backoff")
		s.policy.MaxBackoff = duration(r.MaxBackoff, retry.DefaultMaxBackoff, "retry", "max_backoff")
		s.policy.MaxRetryAfter = duration(r.MaxRetryAfter, retry.DefaultMaxRetryAfter, "retry", "max_retry_after")
		if s.policy.MaxBackoff < s.policy.InitialBackoff {
			bad("max_backoff must not be shorter than initial_backoff", "retry", "max_backoff")
		}
	}
	if r := rc.Retention; r != nil && r.Finished != nil {
		s.retention = 0 // keepForever
		if *r.Finished != keepForever {
			s.retention = duration(r.Finished, defaultRetention, "retention", "finished")
		}
	}

	names := make([]string, 0, len(rc.Provider))
	for name := range rc.Provider {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b := buildBackend(name, rc.Provider[name], duration, integer, bad)
		if b != nil {
			s.backends[name] = b
		}
	}
	if len(rc.Provider) == 0 {
		// Zero setup: a local provider with no rules answers from its
		// template, so a host runs without any provider configured.
		s.backends[typeLocal] = &backend{name: typeLocal, typ: typeLocal, model: local.DefaultModel, p: local.New("", nil)}
	}
	switch {
	case rc.DefaultProvider != nil:
		s.defaultProvider = *rc.DefaultProvider
		if _, ok := rc.Provider[s.defaultProvider]; !ok && !(len(rc.Provider) == 0 && s.defaultProvider == typeLocal) {
			bad(fmt.Sprintf("no provider block is labelled %q (configured: %s)", s.defaultProvider, strings.Join(names, ", ")), "default_provider")
		}
	case len(rc.Provider) == 0:
		s.defaultProvider = typeLocal
	case len(rc.Provider) == 1:
		s.defaultProvider = names[0]
	case rc.Provider[typeLocal] != nil:
		s.defaultProvider = typeLocal
	default:
		bad(fmt.Sprintf("several providers are configured (%s); name the default one", strings.Join(names, ", ")), "default_provider")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

func buildBackend(name string, rp *rawProvider,
	duration func(*string, time.Duration, ...string) time.Duration,
	integer func(*float64, int) int,
	bad func(string, ...string)) *backend {
	path := func(attr string) []string { return []string{"provider", name, attr} }
	if rp == nil || rp.Type == nil {
		bad("type is required: local, openai or anthropic", path("type")...)
		return nil
	}
	str := func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	}
	notFor := func(attr string, set bool) {
		if set {
			bad(fmt.Sprintf("%s does not apply to a provider of type %q", attr, *rp.Type), path(attr)...)
		}
	}
	b := &backend{name: name, typ: *rp.Type, model: str(rp.Model)}
	timeout := duration(rp.Timeout, 0, path("timeout")...)
	switch *rp.Type {
	case typeLocal:
		notFor("base_url", rp.BaseURL != nil)
		notFor("api_key", rp.APIKey != nil)
		notFor("timeout", rp.Timeout != nil)
		notFor("context_window", rp.ContextWindow != nil)
		notFor("max_tokens", rp.MaxTokens != nil)
		var rules []local.Rule
		if rp.Rules != nil {
			var err error
			if rules, err = local.Parse([]byte(*rp.Rules)); err != nil {
				bad(err.Error(), path("rules")...)
				return nil
			}
		}
		if b.model == "" {
			b.model = local.DefaultModel
		}
		b.p = local.New(b.model, rules)
	case typeOpenAI:
		notFor("rules", rp.Rules != nil)
		notFor("max_tokens", rp.MaxTokens != nil)
		base := str(rp.BaseURL)
		if base == "" {
			base = defaultOpenAIURL
		}
		if !validURL(base) {
			bad("base_url must be an absolute http or https URL", path("base_url")...)
		}
		if b.model == "" {
			bad("model is required for an openai provider", path("model")...)
		}
		b.p = openai.New(openai.Config{BaseURL: base, APIKey: str(rp.APIKey), Model: b.model, Timeout: timeout,
			ContextWindow: integer(rp.ContextWindow, 0)})
	case typeAnthropic:
		notFor("rules", rp.Rules != nil)
		notFor("context_window", rp.ContextWindow != nil)
		base := str(rp.BaseURL)
		if base != "" && !validURL(base) {
			bad("base_url must be an absolute http or https URL", path("base_url")...)
		}
		if str(rp.APIKey) == "" {
			bad(`api_key is required for an anthropic provider, e.g. api_key = env("ANTHROPIC_API_KEY")`, path("api_key")...)
		}
		if b.model == "" {
			bad("model is required for an anthropic provider", path("model")...)
		}
		b.p = anthropic.New(anthropic.Config{BaseURL: base, APIKey: str(rp.APIKey), Model: b.model, Timeout: timeout,
			MaxTokens: integer(rp.MaxTokens, anthropic.DefaultMaxTokens)})
	default:
		bad(fmt.Sprintf("%q is not a provider type; use local, openai or anthropic", *rp.Type), path("type")...)
		return nil
	}
	return b
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
