// Package config loads the host configuration file (host.hcl), decodes each
// capability's opaque config block against its plugin's schema, and renders
// diagnostics with file:line:col and a source snippet.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"

	"github.com/wophost/wophost/core/loader"
)

// Defaults applied when the host block or one of its attributes is absent.
const (
	DefaultPluginDir       = "./bin"
	DefaultStateDir        = "./.wophost"
	DefaultLogLevel        = "info"
	DefaultLogFormat       = "text"
	DefaultStartTimeout    = 15 * time.Second
	DefaultMaxMessageBytes = 16 << 20
	DefaultCallDepthLimit  = 8
	DefaultCrashLimit      = 5
	DefaultRunTimeout      = 10 * time.Minute
	DefaultCallTimeout     = 2 * time.Minute
	DefaultMaxConcurrent   = 64
	DefaultCrashWindow     = 10 * time.Minute
)

// Bounds for the numeric host settings.
const (
	MinMessageBytes   = 64 << 10
	MaxMessageBytes   = 1 << 30
	MaxCallDepthLimit = 64
	// MaxDirectUnreadBytes bounds direct_max_unread_bytes (64 GiB).
	MaxDirectUnreadBytes = 64 << 30
	MaxGoMaxProcs        = 1024
	MaxCrashLimit        = 100
	MaxConcurrent        = 10000
)

// PackManifest is the file every pack directory must contain.
const PackManifest = "pack.json"

// Config is a decoded host.hcl.
type Config struct {
	Host         Host
	Capabilities []*Capability
	Packs        []*Pack
	// TrustedKeys are the keys packs may be signed with (trust.go); a
	// block with errors is left out.
	TrustedKeys []*TrustedKey
	// Path is the absolute path of the config file.
	Path string
	// Dir is the directory holding the config file; relative paths in the
	// file are resolved against it.
	Dir string
}

// Host holds the host-wide settings, with defaults applied.
type Host struct {
	// PluginDir is where bare plugin names are looked up (absolute).
	PluginDir string
	// StateDir is where the host keeps its state (absolute).
	StateDir        string
	LogLevel        string
	LogFormat       string
	StartTimeout    time.Duration
	MaxMessageBytes int
	CallDepthLimit  int
	// CrashLimit is how many crashes of one plugin within CrashWindow the
	// host restarts; the next one leaves the capability failed.
	CrashLimit  int
	CrashWindow time.Duration
	// RunTimeout bounds a node run that sets no deadline of its own, and
	// is the most a caller's deadline may ask for.
	RunTimeout time.Duration
	// CallTimeout bounds each host-service call, through the host, of a
	// run whose caller set no deadline, and each operator call without
	// one (host call), never past the run's own deadline: a hung plugin
	// holds such a call this long, not the whole run_timeout.
	CallTimeout time.Duration
	// GoMaxProcs is the host process's GOMAXPROCS; 0 leaves Go's default
	// (the CPUs the process may use).
	GoMaxProcs int
	// ProcessGoMaxProcs is the GOMAXPROCS every plugin and pack process
	// starts with, unless its block's env sets GOMAXPROCS; 0 leaves the
	// host to choose: half the CPUs its Go runtime found at start, at
	// least 1.
	ProcessGoMaxProcs int
	// HTTP configures the listener of `host serve`; nil when the host
	// block has no http block.
	HTTP *HTTP
	// Tracing configures OpenTelemetry export; nil means tracing is off.
	Tracing *Tracing
	// Retention bounds the run records and idempotency records kept
	// under StateDir; defaults apply without a retention block.
	Retention Retention
	// Storage says where durable state is kept; defaults (the embedded
	// backend) apply without a storage block.
	Storage Storage
	// Runs bounds what one run records besides its input (its invocation
	// log); defaults apply without a runs block.
	Runs Runs
	// Health is how the host finds a hung plugin process; defaults apply
	// without a health block.
	Health Health
	// RequireSignature is every pack's require_signature unless its pack
	// block sets its own: a pack must then be signed by a trusted key.
	RequireSignature bool
	// DirectChannels lets the host offer a node direct channels to the
	// plugins that serve one (direct_channels, default true); false keeps
	// every call on the host's routed path.
	DirectChannels bool
	// DirectMaxUnreadBytes bounds the answer bytes a plugin holds for a
	// caller of its direct channel that does not read them, per
	// connection and per pack (direct_max_unread_bytes, default twice
	// MaxMessageBytes).
	DirectMaxUnreadBytes int
	// Sandbox is the containment every pack gets unless its pack block
	// sets its own (sandbox.go); DefaultSandbox without a sandbox block.
	Sandbox Sandbox
	// RequireSandbox is every pack's require_sandbox unless its pack
	// block sets its own: a pack whose sandbox rules cannot all be
	// enforced is then refused rather than started without them.
	RequireSandbox bool
	// Wasm is every WebAssembly pack's caps unless its pack block sets its
	// own (wasm.go); DefaultWasm without a wasm block. Its memory cap is
	// the one the host advertises.
	Wasm Wasm
}

// Capability is one capability block: a plugin and its opaque config.
type Capability struct {
	// Name is the block's label, unique within the file.
	Name string
	// Plugin is the plugin attribute as written.
	Plugin string
	// PluginPath is the absolute path of the plugin executable.
	PluginPath string
	// SHA256 is the expected lowercase hex digest of the executable, or "".
	SHA256 string
	// Families restricts which of the plugin's families this block serves;
	// nil means all of them.
	Families []string
	// Required makes the host fail to start without this capability.
	Required bool
	// StartTimeout is the block's start_timeout or the host default.
	StartTimeout time.Duration
	// MaxConcurrentCalls bounds the calls in flight to the plugin; more
	// wait for a slot until their deadline.
	MaxConcurrentCalls int
	// AllowWritable accepts a plugin executable, or its directory, that
	// users other than the owner may write; by default it is refused.
	AllowWritable bool
	// DirectCalls lets packs call this capability on its plugin's direct
	// channel (direct_calls, default true); false keeps their calls on
	// the host's routed path, where the host relays them.
	DirectCalls bool
	// Env holds the environment variables the operator passes to the
	// plugin process (the env attribute), on top of the base set every
	// process gets; nil when none. Values may come from env() and are
	// secrets then: they are never logged.
	Env map[string]string
	// Sandbox is the containment of the plugin process; nil when the
	// block has no sandbox block, and the plugin runs uncontained. The
	// host's sandbox block does not apply: a plugin's needs are not a
	// pack's.
	Sandbox *Sandbox
	// Config is the body of the config block, decoded later against the
	// plugin's schema; hcl.EmptyBody() when the block is absent.
	Config hcl.Body

	DefRange    hcl.Range
	PluginRange hcl.Range
	SHA256Range hcl.Range
	// ConfigRange is the config block's header, or DefRange when absent.
	ConfigRange hcl.Range

	// pluginBare is set when Plugin is a bare name looked up in plugin_dir.
	pluginBare bool
}

// Pack is one pack block.
type Pack struct {
	// Name is the block's label, unique within the file.
	Name string
	// Path is the absolute path of the pack directory.
	Path string
	// AllowWritable accepts a pack directory, manifest or entry
	// executable that users other than the owner may write.
	AllowWritable bool
	// Env holds the environment variables the operator passes to the
	// pack process, as Capability.Env.
	Env map[string]string
	// RequireSignature refuses the pack unless it is signed by a trusted
	// key: the block's require_signature, or the host block's.
	RequireSignature bool
	// Sandbox is the pack's containment: the host's, with each attribute
	// the pack's sandbox block sets in place of the host's value.
	Sandbox Sandbox
	// Wasm holds the caps of a WebAssembly pack: the host's, with each
	// attribute the pack's wasm block sets in place of the host's value.
	// A pack that is no WebAssembly pack ignores it.
	Wasm Wasm
	// RequireSandbox refuses to start the pack when a rule of Sandbox
	// cannot be enforced: the block's require_sandbox, or the host's.
	RequireSandbox bool

	DefRange  hcl.Range
	PathRange hcl.Range
}

// The raw* types mirror the file's syntax for gohcl, which checks block
// structure, labels and unknown or duplicate arguments. Attributes are kept
// as *hcl.Attribute and evaluated by decoder.attr: gohcl would go on to
// convert a value whose expression already failed (an unset env(), say)
// and bury the real error under "value must be known" and "empty value".
type rawFile struct {
	Hosts        []*rawHost       `hcl:"host,block"`
	Capabilities []*rawCapability `hcl:"capability,block"`
	Packs        []*rawPack       `hcl:"pack,block"`
	TrustedKeys  []*rawTrustedKey `hcl:"trusted_key,block"`
}

type rawHost struct {
	PluginDir         *hcl.Attribute `hcl:"plugin_dir"`
	StateDir          *hcl.Attribute `hcl:"state_dir"`
	LogLevel          *hcl.Attribute `hcl:"log_level"`
	LogFormat         *hcl.Attribute `hcl:"log_format"`
	StartTimeout      *hcl.Attribute `hcl:"start_timeout"`
	MaxMessageBytes   *hcl.Attribute `hcl:"max_message_bytes"`
	CallDepthLimit    *hcl.Attribute `hcl:"call_depth_limit"`
	CrashLimit        *hcl.Attribute `hcl:"crash_limit"`
	CrashWindow       *hcl.Attribute `hcl:"crash_window"`
	RunTimeout        *hcl.Attribute `hcl:"run_timeout"`
	CallTimeout       *hcl.Attribute `hcl:"call_timeout"`
	GoMaxProcs        *hcl.Attribute `hcl:"gomaxprocs"`
	ProcessGoMaxProcs *hcl.Attribute `hcl:"process_gomaxprocs"`
	// RequireSignature is require_signature, the packs' default.
	RequireSignature *hcl.Attribute `hcl:"require_signature"`
	// DirectChannels is direct_channels.
	DirectChannels *hcl.Attribute `hcl:"direct_channels"`
	// DirectMaxUnreadBytes is direct_max_unread_bytes.
	DirectMaxUnreadBytes *hcl.Attribute `hcl:"direct_max_unread_bytes"`
	HTTP                 []*rawHTTP     `hcl:"http,block"`
	Tracing              []*rawTracing  `hcl:"tracing,block"`
	DefRange             hcl.Range      `hcl:",def_range"`

	// Retention is the retention block (retention.go).
	Retention []*rawRetention `hcl:"retention,block"`
	// Storage is the storage block (storage.go).
	Storage []*rawStorage `hcl:"storage,block"`
	// Runs is the runs block (runs.go).
	Runs []*rawRuns `hcl:"runs,block"`
	// Health is the health block (health.go).
	Health []*rawHealth `hcl:"health,block"`
	// Sandbox is the sandbox block (sandbox.go), the packs' default.
	Sandbox []*rawSandbox `hcl:"sandbox,block"`
	// Wasm is the wasm block (wasm.go), the WebAssembly packs' default.
	Wasm []*rawWasm `hcl:"wasm,block"`
	// RequireSandbox is require_sandbox, the packs' default.
	RequireSandbox *hcl.Attribute `hcl:"require_sandbox"`
}

type rawCapability struct {
	Name          string         `hcl:"name,label"`
	Plugin        *hcl.Attribute `hcl:"plugin"`
	PluginRange   hcl.Range      `hcl:"plugin,attr_value_range"`
	SHA256        *hcl.Attribute `hcl:"sha256"`
	SHA256Range   hcl.Range      `hcl:"sha256,attr_value_range"`
	Families      *hcl.Attribute `hcl:"families"`
	Required      *hcl.Attribute `hcl:"required"`
	StartTimeout  *hcl.Attribute `hcl:"start_timeout"`
	MaxConcurrent *hcl.Attribute `hcl:"max_concurrent_calls"`
	// DirectCalls is direct_calls.
	DirectCalls *hcl.Attribute `hcl:"direct_calls"`
	// AllowWritable is allow_writable.
	AllowWritable *hcl.Attribute `hcl:"allow_writable"`
	Env           *hcl.Attribute `hcl:"env"`
	Config        *rawConfig     `hcl:"config,block"`
	// Sandbox is the sandbox block (sandbox.go).
	Sandbox []*rawSandbox `hcl:"sandbox,block"`
	// Wasm is the wasm block (wasm.go).
	Wasm     []*rawWasm `hcl:"wasm,block"`
	DefRange hcl.Range  `hcl:",def_range"`
}

type rawConfig struct {
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawPack struct {
	Name          string         `hcl:"name,label"`
	Path          *hcl.Attribute `hcl:"path"`
	PathRange     hcl.Range      `hcl:"path,attr_value_range"`
	AllowWritable *hcl.Attribute `hcl:"allow_writable"`
	Env           *hcl.Attribute `hcl:"env"`
	// RequireSignature is require_signature.
	RequireSignature *hcl.Attribute `hcl:"require_signature"`
	// RequireSandbox is require_sandbox.
	RequireSandbox *hcl.Attribute `hcl:"require_sandbox"`
	// Sandbox is the sandbox block (sandbox.go).
	Sandbox []*rawSandbox `hcl:"sandbox,block"`
	// Wasm is the wasm block (wasm.go).
	Wasm     []*rawWasm `hcl:"wasm,block"`
	DefRange hcl.Range  `hcl:",def_range"`
}

// LogLevels lists the values of log_level (and of the CLI's --log-level),
// as shown to the operator when a value is rejected.
const LogLevels = "trace, debug, info, warn, error, off"

// Allowed values, as shown to the operator when a value is rejected.
const logFormatList = "text, json"

// IsLogLevel reports whether s is one of LogLevels.
func IsLogLevel(s string) bool {
	switch s {
	case "trace", "debug", "info", "warn", "error", "off":
		return true
	}
	return false
}

func isLogFormat(s string) bool {
	return s == "text" || s == "json"
}

// isSHA256Hex reports whether s looks like a hex SHA-256 digest, in either
// letter case.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Loader parses and decodes config files. It keeps every file it parsed so
// diagnostics can be rendered with source snippets later. The zero value is
// ready to use. A Loader is not safe for concurrent use.
type Loader struct {
	parser *hclparse.Parser
}

// NewLoader returns a Loader that has not read any file yet.
func NewLoader() *Loader {
	return &Loader{parser: hclparse.NewParser()}
}

// Load is a shorthand for NewLoader followed by Loader.Load; the Loader is
// returned so its files can be used to render the diagnostics.
func Load(path string) (*Config, *Loader, hcl.Diagnostics) {
	l := NewLoader()
	cfg, diags := l.Load(path)
	return cfg, l, diags
}

// Files returns every file parsed so far, keyed by the filename used in
// diagnostic ranges.
func (l *Loader) Files() map[string]*hcl.File {
	if l.parser == nil {
		return map[string]*hcl.File{}
	}
	return l.parser.Files()
}

// Load reads and decodes the config file at path; each call reads the file
// afresh, so it also serves to reload. All problems found are returned
// together. The Config is nil only when the file cannot be read;
// otherwise it holds whatever could be decoded, with defaults for the rest,
// and must not be used if the diagnostics contain errors.
func (l *Loader) Load(path string) (*Config, hcl.Diagnostics) {
	if l.parser == nil {
		l.parser = hclparse.NewParser()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid config path",
			Detail:   fmt.Sprintf("Cannot resolve %q: %s.", path, err),
		}}
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read config file",
			Detail:   fmt.Sprintf("Reading %s: %s.", path, err),
		}}
	}

	// The filename is kept as given so diagnostics read the way the
	// operator typed it. Parsing here rather than through the parser's
	// Parse methods, which return a cached file and drop its diagnostics
	// on a second call, keeps a reload honest.
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		file, diags = hcljson.Parse(src, path)
	} else {
		file, diags = hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	}
	if file == nil || file.Body == nil {
		return nil, diags
	}
	l.parser.AddFile(path, file)

	cfg := &Config{Path: abs, Dir: filepath.Dir(abs)}
	d := &decoder{dir: cfg.Dir, ectx: l.EvalContext(cfg.Dir), diags: diags}

	// gohcl keeps decoding past errors, so the raw structs hold every part
	// that was valid and the semantic checks below can still run on it.
	var raw rawFile
	d.diags = append(d.diags, gohcl.DecodeBody(file.Body, d.ectx, &raw)...)

	var pluginDirOK bool
	cfg.Host, pluginDirOK = d.host(raw.Hosts)
	for _, r := range raw.Capabilities {
		cfg.Capabilities = append(cfg.Capabilities, d.capability(r, cfg.Host, pluginDirOK))
	}
	for _, r := range raw.Packs {
		cfg.Packs = append(cfg.Packs, d.pack(r, cfg.Host))
	}
	for _, r := range raw.TrustedKeys {
		if k := d.trustedKey(r); k != nil {
			cfg.TrustedKeys = append(cfg.TrustedKeys, k)
		}
	}
	d.checkUnique("capability", capabilityLabels(cfg.Capabilities))
	d.checkUnique("pack", packLabels(cfg.Packs))
	d.checkUnique("trusted_key", trustedKeyLabels(raw.TrustedKeys))
	if cfg.Host.Storage.Backend == BackendPostgres {
		d.checkStorageSchemas(cfg.Capabilities)
	}
	if len(d.secrets) > 0 {
		// The parsed body keeps its own copies of the values; only the
		// text that snippets quote is masked.
		file.Bytes = maskRanges(file.Bytes, d.secrets)
	}

	sortDiagnostics(d.diags)
	return cfg, d.diags
}

// decoder turns the raw structs into a Config, collecting diagnostics.
type decoder struct {
	dir   string
	ectx  *hcl.EvalContext
	diags hcl.Diagnostics
	// secrets are the source ranges of secret values written in the
	// file, masked in the copy of it that diagnostics quote.
	secrets []hcl.Range
}

func (d *decoder) errorf(rng hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  rng.Ptr(),
	})
}

// attr evaluates an optional attribute into target, a pointer to a Go
// value gocty understands. It reports whether target was set; an absent or
// null attribute leaves it alone, as does an invalid one after its errors
// have been recorded.
func (d *decoder) attr(a *hcl.Attribute, target any) bool {
	v, ok := d.value(a)
	if !ok {
		return false
	}
	// The value is final; gohcl only has to convert it, with its usual
	// "Unsuitable value type" diagnostics.
	diags := gohcl.DecodeExpression(hcl.StaticExpr(v, a.Expr.Range()), nil, target)
	for _, diag := range diags {
		// gohcl's detail says what type was wanted, not of what.
		diag.Detail = a.Name + ": " + diag.Detail
	}
	d.diags = append(d.diags, diags...)
	return !diags.HasErrors()
}

// value evaluates an optional attribute, recording its errors. It reports
// false when the attribute is absent, null or failed.
func (d *decoder) value(a *hcl.Attribute) (cty.Value, bool) {
	if a == nil {
		return cty.NilVal, false
	}
	v, diags := a.Expr.Value(d.ectx)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() || v.IsNull() {
		return cty.NilVal, false
	}
	return v, true
}

// stringAttr is attr for strings that must not be empty when given.
func (d *decoder) stringAttr(a *hcl.Attribute) (string, bool) {
	var s string
	if !d.attr(a, &s) {
		return "", false
	}
	if s == "" {
		d.errorf(a.Expr.Range(), "Empty value", "%s must not be empty.", a.Name)
		return "", false
	}
	return s, true
}

// durationAttr is attr for Go duration strings, which must be positive.
func (d *decoder) durationAttr(a *hcl.Attribute) (time.Duration, bool) {
	s, ok := d.stringAttr(a)
	if !ok {
		return 0, false
	}
	rng := a.Expr.Range()
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.errorf(rng, "Invalid duration", "%s must be a duration such as \"15s\" or \"1m30s\": %s.", a.Name, err)
		return 0, false
	}
	if dur <= 0 {
		d.errorf(rng, "Invalid duration", "%s must be greater than zero; got %q.", a.Name, s)
		return 0, false
	}
	return dur, true
}

// intAttr is attr for whole numbers within [lo, hi].
func (d *decoder) intAttr(a *hcl.Attribute, lo, hi int) (int, bool) {
	var n int
	if !d.attr(a, &n) {
		return 0, false
	}
	if n < lo || n > hi {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%s must be between %d and %d; got %d.", a.Name, lo, hi, n)
		return 0, false
	}
	return n, true
}

// oneOfAttr is attr for strings restricted to a fixed set.
func (d *decoder) oneOfAttr(a *hcl.Attribute, valid func(string) bool, allowed string) (string, bool) {
	var s string
	if !d.attr(a, &s) {
		return "", false
	}
	if !valid(s) {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%s must be one of %s; got %q.", a.Name, allowed, s)
		return "", false
	}
	return s, true
}

// host applies defaults and validates the host block. The returned bool
// reports whether PluginDir can be trusted for plugin look-ups: after a bad
// plugin_dir, "plugin not found" errors would only be noise.
func (d *decoder) host(hosts []*rawHost) (Host, bool) {
	h := Host{
		PluginDir:       resolvePath(d.dir, DefaultPluginDir),
		StateDir:        resolvePath(d.dir, DefaultStateDir),
		LogLevel:        DefaultLogLevel,
		LogFormat:       DefaultLogFormat,
		StartTimeout:    DefaultStartTimeout,
		MaxMessageBytes: DefaultMaxMessageBytes,
		CallDepthLimit:  DefaultCallDepthLimit,
		CrashLimit:      DefaultCrashLimit,
		CrashWindow:     DefaultCrashWindow,
		RunTimeout:      DefaultRunTimeout,
		CallTimeout:     DefaultCallTimeout,
		Retention:       DefaultRetention(),
		Storage:         DefaultStorage(),
		Runs:            DefaultRuns(),
		Health:          DefaultHealth(),
		Sandbox:         DefaultSandbox(),
		Wasm:            DefaultWasm(),
		DirectChannels:  true,
		// Twice the default max_message_bytes, as below.
		DirectMaxUnreadBytes: 2 * DefaultMaxMessageBytes,
	}
	if len(hosts) == 0 {
		return h, true
	}
	for _, dup := range hosts[1:] {
		d.errorf(dup.DefRange, "Duplicate host block",
			"A host block is declared at %s and again at %s; only one is allowed.",
			posString(hosts[0].DefRange), posString(dup.DefRange))
	}
	r := hosts[0]

	pluginDirOK := true
	if s, ok := d.stringAttr(r.PluginDir); ok {
		h.PluginDir = resolvePath(d.dir, s)
	} else if r.PluginDir != nil {
		pluginDirOK = false
	}
	if s, ok := d.stringAttr(r.StateDir); ok {
		h.StateDir = resolvePath(d.dir, s)
	}
	if s, ok := d.oneOfAttr(r.LogLevel, IsLogLevel, LogLevels); ok {
		h.LogLevel = s
	}
	if s, ok := d.oneOfAttr(r.LogFormat, isLogFormat, logFormatList); ok {
		h.LogFormat = s
	}
	if dur, ok := d.durationAttr(r.StartTimeout); ok {
		h.StartTimeout = dur
	}
	if n, ok := d.intAttr(r.MaxMessageBytes, MinMessageBytes, MaxMessageBytes); ok {
		h.MaxMessageBytes = n
	}
	if n, ok := d.intAttr(r.CallDepthLimit, 1, MaxCallDepthLimit); ok {
		h.CallDepthLimit = n
	}
	if n, ok := d.intAttr(r.CrashLimit, 1, MaxCrashLimit); ok {
		h.CrashLimit = n
	}
	if dur, ok := d.durationAttr(r.CrashWindow); ok {
		h.CrashWindow = dur
	}
	if dur, ok := d.durationAttr(r.RunTimeout); ok {
		h.RunTimeout = dur
	}
	if dur, ok := d.durationAttr(r.CallTimeout); ok {
		h.CallTimeout = dur
	}
	if n, ok := d.intAttr(r.GoMaxProcs, 0, MaxGoMaxProcs); ok {
		h.GoMaxProcs = n
	}
	if n, ok := d.intAttr(r.ProcessGoMaxProcs, 0, MaxGoMaxProcs); ok {
		h.ProcessGoMaxProcs = n
	}
	d.attr(r.RequireSignature, &h.RequireSignature)
	d.attr(r.DirectChannels, &h.DirectChannels)
	// At least one answer of the largest size fits.
	h.DirectMaxUnreadBytes = 2 * h.MaxMessageBytes
	if n, ok := d.intAttr(r.DirectMaxUnreadBytes, h.MaxMessageBytes, MaxDirectUnreadBytes); ok {
		h.DirectMaxUnreadBytes = n
	}
	h.HTTP = d.http(r.HTTP)
	h.Tracing = d.tracing(r.Tracing)
	h.Retention = d.retention(r.Retention)
	h.Storage = d.storage(r.Storage)
	h.Runs = d.runs(r.Runs)
	h.Health = d.health(r.Health)
	d.attr(r.RequireSandbox, &h.RequireSandbox)
	// Without a sandbox block, a pack's inherited policy points at the
	// host block, where one would be added.
	h.Sandbox.DefRange = r.DefRange
	h.Sandbox, _ = d.sandbox(r.Sandbox, h.Sandbox)
	h.Wasm = d.wasm(r.Wasm, h.Wasm)
	return h, pluginDirOK
}

func (d *decoder) capability(r *rawCapability, host Host, pluginDirOK bool) *Capability {
	c := &Capability{
		Name:               r.Name,
		StartTimeout:       host.StartTimeout,
		MaxConcurrentCalls: DefaultMaxConcurrent,
		DirectCalls:        true,
		Config:             hcl.EmptyBody(),
		DefRange:           r.DefRange,
		PluginRange:        r.PluginRange,
		SHA256Range:        r.SHA256Range,
		ConfigRange:        r.DefRange,
	}
	if r.Config != nil {
		c.ConfigRange = r.Config.DefRange
		if r.Config.Body != nil {
			c.Config = r.Config.Body
		}
	}
	if r.Name == "" {
		d.errorf(r.DefRange, "Invalid capability name", "A capability's label is its name and must not be empty.")
	}

	nErrs := len(d.diags)
	if plugin, ok := d.stringAttr(r.Plugin); ok {
		c.Plugin = plugin
		// Whether the executable exists is checked when the host starts the
		// plugin (CheckPlugin): a missing plugin withdraws only its
		// families, it does not stop the host.
		c.PluginPath, c.pluginBare = resolvePlugin(d.dir, host.PluginDir, plugin)
	} else if len(d.diags) == nErrs {
		// Absent or null: say so at the block, as nothing else will.
		d.errorf(r.DefRange, "Missing required argument",
			"The argument \"plugin\" is required in capability %q: it names the plugin executable.", r.Name)
	}

	var sum string
	if d.attr(r.SHA256, &sum) {
		if isSHA256Hex(sum) {
			c.SHA256 = strings.ToLower(sum)
		} else {
			d.errorf(c.SHA256Range, "Invalid sha256",
				"sha256 must be 64 hexadecimal characters (the plugin executable's SHA-256 digest); got %d characters %q.", len(sum), sum)
		}
	}

	var families []string
	if d.attr(r.Families, &families) {
		d.checkFamilies(families, r.Families.Expr.Range())
		c.Families = families
	}
	d.attr(r.Required, &c.Required)
	d.attr(r.AllowWritable, &c.AllowWritable)
	d.attr(r.DirectCalls, &c.DirectCalls)
	c.Env = d.env(r.Env)
	if sb, ok := d.sandbox(r.Sandbox, DefaultSandbox()); ok {
		c.Sandbox = &sb
	}
	if n, ok := d.intAttr(r.MaxConcurrent, 1, MaxConcurrent); ok {
		c.MaxConcurrentCalls = n
	}
	if dur, ok := d.durationAttr(r.StartTimeout); ok {
		c.StartTimeout = dur
	}
	return c
}

func (d *decoder) checkFamilies(families []string, rng hcl.Range) {
	seen := make(map[string]bool, len(families))
	for i, f := range families {
		switch {
		case f == "":
			d.errorf(rng, "Invalid families", "Element %d of families is empty; each element names a capability family such as \"acme.kv\".", i)
		case seen[f]:
			d.errorf(rng, "Invalid families", "Family %q is listed more than once.", f)
		}
		seen[f] = true
	}
}

func (d *decoder) pack(r *rawPack, host Host) *Pack {
	p := &Pack{Name: r.Name, DefRange: r.DefRange, PathRange: r.PathRange, RequireSignature: host.RequireSignature}
	p.RequireSandbox = host.RequireSandbox
	d.attr(r.RequireSignature, &p.RequireSignature)
	d.attr(r.RequireSandbox, &p.RequireSandbox)
	p.Sandbox, _ = d.sandbox(r.Sandbox, host.Sandbox)
	p.Wasm = d.wasm(r.Wasm, host.Wasm)
	if r.Name == "" {
		d.errorf(r.DefRange, "Invalid pack name", "A pack's label is its name and must not be empty.")
	}
	d.attr(r.AllowWritable, &p.AllowWritable)
	p.Env = d.env(r.Env)
	nErrs := len(d.diags)
	if path, ok := d.stringAttr(r.Path); ok {
		// Checked when the host loads the pack (CheckPackDir): a broken
		// pack is refused alone.
		p.Path = resolvePath(d.dir, path)
	} else if len(d.diags) == nErrs {
		d.errorf(r.DefRange, "Missing required argument",
			"The argument \"path\" is required in pack %q: it names the pack's directory.", r.Name)
	}
	return p
}

// label is a block label and where its block is declared.
type label struct {
	name string
	rng  hcl.Range
}

func capabilityLabels(cs []*Capability) []label {
	out := make([]label, 0, len(cs))
	for _, c := range cs {
		out = append(out, label{c.Name, c.DefRange})
	}
	return out
}

func packLabels(ps []*Pack) []label {
	out := make([]label, 0, len(ps))
	for _, p := range ps {
		out = append(out, label{p.Name, p.DefRange})
	}
	return out
}

// checkUnique reports each repeated label at the repeat, naming where the
// first one is so the operator can pick which to keep.
func (d *decoder) checkUnique(kind string, labels []label) {
	first := make(map[string]hcl.Range, len(labels))
	for _, l := range labels {
		if l.name == "" {
			continue
		}
		if prev, dup := first[l.name]; dup {
			d.errorf(l.rng, "Duplicate "+kind,
				"%s %q is declared at %s and again at %s; %s names must be unique.",
				titleCase(kind), l.name, posString(prev), posString(l.rng), kind)
			continue
		}
		first[l.name] = l.rng
	}
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// resolvePath makes p absolute against dir unless it already is.
func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// resolvePlugin returns the executable's absolute path and whether plugin
// was a bare name (looked up in pluginDir rather than relative to dir).
func resolvePlugin(dir, pluginDir, plugin string) (string, bool) {
	bare := !strings.ContainsAny(plugin, `/\`) && plugin != "." && plugin != ".."
	if bare {
		return filepath.Join(pluginDir, plugin), true
	}
	return resolvePath(dir, plugin), false
}

// CheckPlugin reports, at the plugin attribute, a plugin executable that
// is missing, a directory, or not executable; nil when it looks usable.
// It words these for the operator, with where the name was looked up.
// The checks that decide are made on the binary once opened
// (loader.OpenExecutable), which is also what runs: its permissions, that
// others may not write it, its sha256.
func CheckPlugin(c *Capability, pluginDir string) *hcl.Diagnostic {
	return checkPlugin(c.PluginPath, c.pluginBare, pluginDir, c.PluginRange)
}

func checkPlugin(path string, bare bool, pluginDir string, rng hcl.Range) *hcl.Diagnostic {
	where := "Paths are resolved relative to the config file's directory."
	if bare {
		where = fmt.Sprintf("A bare plugin name is looked up in plugin_dir (%s).", pluginDir)
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		reason := err.Error()
		if os.IsNotExist(err) {
			reason = "no such file"
		}
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Plugin not found",
			Detail:   fmt.Sprintf("Cannot use plugin executable %s: %s. %s", path, reason, where),
			Subject:  rng.Ptr(),
		}
	case info.IsDir():
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Plugin is not a file",
			Detail:   fmt.Sprintf("%s is a directory, not a plugin executable. %s", path, where),
			Subject:  rng.Ptr(),
		}
	case runtime.GOOS != "windows" && info.Mode().Perm()&0o111 == 0:
		// Windows has no execute bit; there the start attempt reports it.
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Plugin is not executable",
			Detail:   fmt.Sprintf("%s exists but has no execute permission (mode %s).", path, info.Mode().Perm()),
			Subject:  rng.Ptr(),
		}
	}
	return nil
}

// CheckPackDir reports, at the path attribute, a pack directory that is
// missing or has no pack.json; nil when it looks usable. Unless the block
// sets allow_writable, it also refuses a pack whose directory or pack.json
// users other than the owner may write. The runtime.entry executable is
// checked when it is opened to be run (loader.OpenPackEntry), inside the
// pack directory, so that what is checked is what runs.
func CheckPackDir(p *Pack) *hcl.Diagnostic {
	if d := checkPackDir(p.Path, p.PathRange); d != nil {
		return d
	}
	if p.AllowWritable {
		return nil
	}
	writable := func(err error) *hcl.Diagnostic {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Pack is writable by others",
			Detail:   fmt.Sprintf("Pack %q: %s.", p.Name, err),
			Subject:  p.PathRange.Ptr(),
		}
	}
	if err := loader.CheckWritable(filepath.Join(p.Path, PackManifest)); err != nil {
		return writable(err)
	}
	return nil
}

func checkPackDir(path string, rng hcl.Range) *hcl.Diagnostic {
	info, err := os.Stat(path)
	if err != nil {
		reason := err.Error()
		if os.IsNotExist(err) {
			reason = "no such directory"
		}
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Pack directory not found",
			Detail:   fmt.Sprintf("Cannot use pack directory %s: %s. Pack paths are resolved relative to the config file's directory.", path, reason),
			Subject:  rng.Ptr(),
		}
	}
	if !info.IsDir() {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Pack path is not a directory",
			Detail:   fmt.Sprintf("%s is a file; a pack path must name a directory containing %s.", path, PackManifest),
			Subject:  rng.Ptr(),
		}
	}
	manifest := filepath.Join(path, PackManifest)
	if info, err := os.Stat(manifest); err != nil || !info.Mode().IsRegular() {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Pack manifest not found",
			Detail:   fmt.Sprintf("%s has no %s; every pack directory needs one.", path, PackManifest),
			Subject:  rng.Ptr(),
		}
	}
	return nil
}

// posString renders a range's start as file:line:col, the form editors and
// terminals turn into links.
func posString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", displayName(r.Filename), r.Start.Line, r.Start.Column)
}

// sortDiagnostics orders diagnostics by source position so output follows
// the file; gohcl and hcldec emit them in map order otherwise.
func sortDiagnostics(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil && b.Subject == nil:
			return strings.Compare(a.Summary, b.Summary)
		case a.Subject == nil:
			return -1
		case b.Subject == nil:
			return 1
		}
		if c := strings.Compare(a.Subject.Filename, b.Subject.Filename); c != 0 {
			return c
		}
		if c := a.Subject.Start.Byte - b.Subject.Start.Byte; c != 0 {
			return c
		}
		// Ties are broken by summary so the order never depends on map
		// iteration.
		return strings.Compare(a.Summary, b.Summary)
	})
}
