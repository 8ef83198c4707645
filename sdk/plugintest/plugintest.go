// Package plugintest is a conformance kit for capability plugins. A vendor
// calls Run from a Go test with the path of their plugin binary, whatever
// language it is written in, and gets one subtest per protocol check. Start
// gives a handle on a running plugin for family-specific tests. Check runs
// the same checks, the core families' contract checks included, outside a
// test and returns a Report of every rule; `host conformance` is built on
// it.
//
// The kit starts the binary the way the wophost host does: through
// go-plugin, gRPC only, with automatic mTLS and the wophost handshake.
package plugintest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/wophost/wophost/sdk/internal/wire"
	"github.com/wophost/wophost/sdk/plugin"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

const (
	defaultStartTimeout = 15 * time.Second
	// rpcTimeout bounds each call the kit makes, so that a wedged plugin
	// fails its check instead of hanging the test binary.
	rpcTimeout = 30 * time.Second
	// logLimit bounds the plugin log kept for a failing test; the tail is
	// what explains a failure.
	logLimit = 256 << 10
)

// HostServicesFunc answers one callback a plugin makes to the host. An
// error should be a *wop.Error; any other error reaches the plugin as
// "internal".
type HostServicesFunc func(ctx context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error)

// Config says how to run the kit against one plugin binary.
type Config struct {
	// Binary is the path of the plugin executable: a program, or a
	// launcher script for a plugin in an interpreted language.
	Binary string
	// Args are the arguments Binary is started with (none under the
	// host, which starts a plugin without arguments; a script's path
	// when Binary is its interpreter).
	Args []string
	// InProcess, when set, is a Go plugin run inside the test's own
	// process instead of Binary: the kit then checks the plugin's
	// definition with Validate and talks to it over go-plugin's
	// in-process gRPC connection, with no binary to build and no process
	// to exit. Env and StartTimeout do not apply. A plugin that passes
	// in process should still be run once as a binary, which alone shows
	// the handshake and the process's environment.
	InProcess *plugin.Plugin
	// Config is the decoded config block sent to Configure, as JSON. Nil
	// sends {}.
	Config json.RawMessage
	// Calls are sample invocations that must succeed once the plugin is
	// configured. Run needs at least one and makes the first one several
	// times, so it should be safe to repeat.
	Calls []Call
	// HostServices answers the plugin's callbacks to the host. Nil refuses
	// every callback with capability_not_provided, as a host that
	// advertises nothing would.
	HostServices HostServicesFunc
	// Env holds extra "KEY=VALUE" environment variables for the plugin
	// process. As under the host, the process sees only the base set of
	// the test's environment (PATH, HOME, TMPDIR, TZ, the locale; see
	// hostwire.BaseEnv), the protocol's variables and these.
	Env []string
	// StartTimeout bounds the handshake. Zero means 15s.
	StartTimeout time.Duration
	// Storage is sent to Configure as the host's storage settings, so
	// the kit can run a plugin against a database. The zero value is the
	// embedded backend (state under a temporary StateDir); a Schema left
	// empty is "wophost_plugintest".
	Storage plugin.Storage
}

// Call is one sample invocation.
type Call struct {
	Family, Method string
	// Payload is the request, as JSON. Nil sends {}.
	Payload json.RawMessage
	// Check, if set, examines the result of the call.
	Check func(t testing.TB, result json.RawMessage)
	// WantResult, when set, is JSON the result must contain: an object
	// contains another when it has each of its members with a value that
	// contains the other's; any other value must be equal.
	WantResult json.RawMessage
	// WantCode, when set, says the call must fail with this error code.
	// It must be a code a host accepts from the family: one of
	// wop.CoreCodes, a vendor code by OpenWOP's grammar ("org.name", one
	// dot) of the family's org, or for a core family a contract family
	// code (snake_case, no dot); the kit refuses any other.
	WantCode string
}

// checkWantCode returns why code is no code a host accepts from family,
// or "" when it is one.
func checkWantCode(family, code string) string {
	if slices.Contains(wop.CoreCodes(), code) {
		return ""
	}
	if wop.IsCoreFamily(family) {
		if !strings.Contains(code, ".") && code != "" && strings.ToLower(code) == code {
			return ""
		}
		if wop.ValidVendorCode(code) {
			return ""
		}
		return "neither a core code, a family code nor a vendor code \"org.name\""
	}
	if !wop.ValidVendorCode(code) {
		return "not a vendor code by OpenWOP's grammar: \"org.name\", exactly one dot, e.g. \"acme.key_not_found\""
	}
	org, _, _ := strings.Cut(family, ".")
	if codeOrg, _, _ := strings.Cut(code, "."); codeOrg != org {
		return "a vendor code of another org than the family's, " + org
	}
	return ""
}

// Description is what a plugin says about itself in Describe.
type Description = wire.Description

// FamilyDescription is one family a plugin says it can serve.
type FamilyDescription = wire.FamilyDescription

// ConfigureResult is the plugin's answer to Configure.
type ConfigureResult struct {
	// Facets maps each family to its facets under this configuration.
	Facets map[string]map[string]json.RawMessage
	// Details maps each family to the JSON object the plugin lists about
	// it under this configuration (never advertised).
	Details map[string]json.RawMessage
	// Diagnostics, when not empty, mean the plugin refused the config.
	Diagnostics []Diagnostic
}

// Diagnostic is a configuration problem the plugin reported.
type Diagnostic struct {
	Summary, Detail string
	// Path names the offending attribute.
	Path []string
}

// String formats d the way a test failure should show it.
func (d Diagnostic) String() string {
	s := d.Summary
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	if len(d.Path) > 0 {
		s += fmt.Sprintf(" (at %q)", d.Path)
	}
	return s
}

// StartError is a plugin binary the kit could not start. Err says why: in
// the process's own words when it wrote any to stderr before it went away
// (a *hostwire.ExitError or *hostwire.HandshakeError, in place of
// go-plugin's guesses at a missing handshake).
type StartError struct {
	// Binary is the absolute path of the plugin binary.
	Binary string
	Err    error
}

// Error implements error.
func (e *StartError) Error() string { return "plugintest: start " + e.Binary + ": " + e.Err.Error() }

// Unwrap returns why the plugin did not start.
func (e *StartError) Unwrap() error { return e.Err }

// Plugin is a running plugin process. It is killed when the test that
// started it ends.
type Plugin struct {
	exited   func() bool
	conn     *wire.CapabilityConn
	host     wophostv1.HostServicesServer
	tokens   *runTokens
	stateDir string
	// socketDir is where a plugin that serves a direct channel makes its
	// socket.
	socketDir string
	storage   plugin.Storage
	// cmd and words are the command of a plugin binary and the end of
	// its stderr, nil for a plugin served in the test's process.
	cmd   *exec.Cmd
	words *wire.LastWords
}

// Start launches cfg.Binary through go-plugin as the host does, or serves
// cfg.InProcess inside the test's process, and returns a handle on it, not
// yet configured. It fails t if the plugin does not
// complete the handshake within cfg.StartTimeout.
func Start(t testing.TB, cfg Config) *Plugin {
	t.Helper()
	return start(t, cfg)
}

// start is Start reporting to t.
func start(t tb, cfg Config) *Plugin {
	t.Helper()
	hostFn := cfg.HostServices
	if hostFn == nil {
		hostFn = refuseHostServices
	}
	if cfg.InProcess != nil {
		p := startInProcess(t, cfg.InProcess, hostFn)
		p.storage = kitStorage(cfg.Storage)
		return p
	}
	if cfg.Binary == "" {
		t.Fatal("plugintest: Config.Binary is empty")
	}
	// An absolute path keeps exec from searching PATH for a bare name and
	// survives the change of working directory below.
	bin, err := filepath.Abs(cfg.Binary)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	if fi, err := os.Stat(bin); err != nil {
		t.Fatalf("plugintest: plugin binary: %v", err)
	} else if !fi.Mode().IsRegular() {
		t.Fatalf("plugintest: plugin binary %s is not a regular file", bin)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}

	cmd := exec.Command(bin, cfg.Args...)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = wire.ProcessEnv(filepath.Base(bin), hclog.Debug, wire.DefaultMaxMessageBytes)
	cmd.Env = append(cmd.Env, cfg.Env...)

	// The plugin log is kept rather than streamed to t.Log: go-plugin writes
	// it from its own goroutines, and it only matters when a check fails.
	logs := &logBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Debug, Output: logs})
	clientConfig, started, err := wire.ClientConfig(cmd, logger, timeout, wire.DefaultMaxMessageBytes)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	// What the process writes to its stderr before it serves comes to
	// Stderr, and after, through go-plugin's stream, to SyncStderr.
	words := &wire.LastWords{}
	clientConfig.Stderr = words
	clientConfig.SyncStdout, clientConfig.SyncStderr = logs, io.MultiWriter(logs, words)
	client := goplugin.NewClient(clientConfig)
	t.Cleanup(func() {
		// Kill waits for go-plugin's log goroutines, so the buffer is
		// complete once it returns.
		client.Kill()
		if t.Failed() {
			t.Logf("plugintest: log of %s:\n%s", filepath.Base(bin), logs.String())
		}
	})

	rpc, err := client.Client()
	started()
	if err != nil {
		// Kill waits for go-plugin's readers and its wait for the process:
		// then the process's words are all in and how it ended is known.
		client.Kill()
		fatal(t, &StartError{Binary: bin, Err: wire.StartFailure(err, cmd.ProcessState, words.String())})
	}
	raw, err := rpc.Dispense(wire.KindCapability)
	if err != nil {
		t.Fatalf("plugintest: %s does not serve a capability plugin: %v", bin, err)
	}
	conn, ok := raw.(*wire.CapabilityConn)
	if !ok {
		t.Fatalf("plugintest: unexpected plugin client %T", raw)
	}
	p := newHandle(t, conn, client.Exited, hostFn)
	p.storage = kitStorage(cfg.Storage)
	p.cmd, p.words = cmd, words
	return p
}

// callError is the error of the call named call that failed with err: a
// *hostwire.ExitError in the plugin's own words when its process exited
// during the call.
func (p *Plugin) callError(call string, err error) error {
	if p.cmd == nil {
		return wire.FromStatus(err)
	}
	return wire.ExitedDuring(call, err, p.conn.Exited.Done(), p.cmd, p.words)
}

// fatalCall fails t with the error of the call named call, which a rule
// of Check keeps as its Err when the plugin exited during it.
func fatalCall(t tb, call string, err error) {
	t.Helper()
	err = fmt.Errorf("%s failed: %w", call, err)
	var exit *wire.ExitError
	if errors.As(err, &exit) {
		fatal(t, err)
	}
	t.Fatal(err)
}

// kitStorage is s with the kit's defaults: the embedded backend, and the
// schema a host would give a capability block named "plugintest".
func kitStorage(s plugin.Storage) plugin.Storage {
	if s.Backend == "" {
		s.Backend = plugin.StorageEmbedded
	}
	if s.Schema == "" {
		s.Schema = "wophost_plugintest"
	}
	return s
}

// newHandle is the Plugin handle on conn, answering its callbacks with
// hostFn and giving each run it invokes a token.
func newHandle(t tb, conn *wire.CapabilityConn, exited func() bool, hostFn HostServicesFunc) *Plugin {
	tokens := &runTokens{m: map[string]wop.RunToken{}}
	// The direct channel's socket lives as long as the plugin, in a short
	// path: a unix socket's is bounded (108 bytes on Linux).
	socketDir, err := os.MkdirTemp("", "wophost-direct-")
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(socketDir) })
	return &Plugin{
		exited:    exited,
		conn:      conn,
		host:      hostServices{fn: hostFn, tokens: tokens},
		tokens:    tokens,
		stateDir:  t.TempDir(),
		socketDir: socketDir,
	}
}

// Describe asks the plugin what it serves, failing t if the call fails.
func (p *Plugin) Describe(t testing.TB) *Description {
	t.Helper()
	return p.describe(t)
}

func (p *Plugin) describe(t tb) *Description {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	defer cancel()
	resp, err := p.conn.Client.Describe(ctx, &wophostv1.DescribeRequest{})
	if err != nil {
		fatalCall(t, "Describe", p.callError("Describe", err))
	}
	return wire.DescriptionFromProto(resp)
}

// ConfigSchema fetches the schema of the plugin's config block, failing t
// if the call fails or the schema does not decode into a schema.Block.
// Unknown fields are refused: the host would silently drop them.
func (p *Plugin) ConfigSchema(t testing.TB) schema.Block {
	t.Helper()
	return p.configSchema(t)
}

func (p *Plugin) configSchema(t tb) schema.Block {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	defer cancel()
	resp, err := p.conn.Client.ConfigSchema(ctx, &wophostv1.ConfigSchemaRequest{})
	if err != nil {
		fatalCall(t, "ConfigSchema", p.callError("ConfigSchema", err))
	}
	var b schema.Block
	if len(resp.GetSchema()) == 0 {
		// The host reads an empty schema as a plugin without config.
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(resp.GetSchema()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("config schema does not decode into a schema.Block: %v\nschema: %s", err, resp.GetSchema())
	}
	if dec.More() {
		t.Fatalf("config schema has data after the JSON value\nschema: %s", resp.GetSchema())
	}
	return b
}

// Configure sends config (nil sends {}) and returns the facets of each
// family. It fails t if the call fails or the plugin reports diagnostics.
func (p *Plugin) Configure(t testing.TB, config json.RawMessage) map[string]map[string]json.RawMessage {
	t.Helper()
	return p.configure(t, config).Facets
}

// configure is Configure returning the whole answer.
func (p *Plugin) configure(t tb, config json.RawMessage) *ConfigureResult {
	t.Helper()
	res, _ := p.configureDirectOrNot(t, config, nil)
	return res
}

// configureDirectOrNot is configure with direct-channel settings (nil for
// none), returning the channel the plugin answers, if any.
func (p *Plugin) configureDirectOrNot(t tb, config json.RawMessage, settings *wophostv1.DirectChannelSettings) (*ConfigureResult, *wophostv1.DirectChannelEndpoint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	defer cancel()
	res, ep, err := p.configureWith(ctx, config, settings)
	if err != nil {
		fatalCall(t, "Configure", err)
	}
	if len(res.Diagnostics) > 0 {
		t.Fatalf("Configure refused the config %s: %s", orEmptyObject(config), joinDiagnostics(res.Diagnostics))
	}
	return res, ep
}

// ConfigureErr sends config (nil sends {}) with a HostServices connection
// for the plugin's callbacks, and returns the plugin's answer. Diagnostics
// are not an error; a failed call or a facets value that is not a JSON
// object is.
func (p *Plugin) ConfigureErr(ctx context.Context, config json.RawMessage) (*ConfigureResult, error) {
	res, _, err := p.configureWith(ctx, config, nil)
	return res, err
}

// configureWith is ConfigureErr with the direct-channel settings given
// (nil for none); it returns the channel the plugin answers, if any.
func (p *Plugin) configureWith(ctx context.Context, config json.RawMessage, settings *wophostv1.DirectChannelSettings) (*ConfigureResult, *wophostv1.DirectChannelEndpoint, error) {
	// A fresh broker id per Configure, as the host does on a restart.
	brokerID := wire.ServeHostServices(p.conn.Broker, p.host, wire.DefaultMaxMessageBytes)
	resp, err := p.conn.Client.Configure(ctx, &wophostv1.ConfigureRequest{
		Config:               orEmptyObject(config),
		HostServicesBrokerId: brokerID,
		StateDir:             p.stateDir,
		Storage:              plugin.StorageToProto(p.storage),
		HostVersion:          "plugintest",
		DirectChannel:        settings,
	})
	if err != nil {
		return nil, nil, p.callError("Configure", err)
	}
	out := &ConfigureResult{Facets: map[string]map[string]json.RawMessage{}, Details: map[string]json.RawMessage{}}
	for _, d := range resp.GetDiagnostics() {
		out.Diagnostics = append(out.Diagnostics, Diagnostic{Summary: d.GetSummary(), Detail: d.GetDetail(), Path: d.GetPath()})
	}
	for fam, raw := range resp.GetFacets() {
		facets := map[string]json.RawMessage{}
		// The host reads empty bytes as no facets; anything else must be an
		// object, which rules out null and arrays that Unmarshal would take.
		if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 {
			if trimmed[0] != '{' {
				return nil, nil, fmt.Errorf("facets of %s are not a JSON object: %s", fam, raw)
			}
			if err := json.Unmarshal(trimmed, &facets); err != nil {
				return nil, nil, fmt.Errorf("facets of %s are not a JSON object: %w", fam, err)
			}
		}
		out.Facets[fam] = facets
	}
	for fam, raw := range resp.GetDetails() {
		if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
			return nil, nil, fmt.Errorf("details of %s are not a JSON object: %s", fam, raw)
		}
		out.Details[fam] = raw
	}
	return out, resp.GetDirectChannel(), nil
}

// Invoke sends one call to the plugin as the host would. A non-nil error is
// always a *wop.Error, exactly as the plugin sent it: unlike the host, the
// kit fills in no capability.
//
// As the host does, the kit gives each run id a run token, which goes to
// the plugin in call unless call carries a token of its own (which then
// becomes the run's), and refuses a callback that names a run the kit
// invoked without that run's token, with capability_not_declared: a
// plugin's callbacks must send back the call context it was invoked with.
func (p *Plugin) Invoke(ctx context.Context, family, method string, payload json.RawMessage, call wop.CallContext) (json.RawMessage, error) {
	call.Token = p.tokens.bind(call.RunID, call.Token)
	resp, err := p.conn.Client.Invoke(ctx, &wophostv1.InvokeRequest{
		Family: family, Method: method, Payload: payload, Call: wire.CallContextToProto(call),
	})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	return resp.GetResult(), nil
}

// Exited reports whether the plugin process has exited.
func (p *Plugin) Exited() bool { return p.exited() }

// startInProcess serves p inside the test's process over go-plugin's
// in-process gRPC connection, broker included, so that callbacks to the
// host services reach hostFn as they would from a binary.
func startInProcess(t tb, p *plugin.Plugin, hostFn HostServicesFunc) *Plugin {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatalf("plugintest: invalid plugin definition: %v", err)
	}
	logs := &logBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Debug, Output: logs})
	client, _ := goplugin.TestPluginGRPCConn(asTB(t), false, map[string]goplugin.Plugin{wire.KindCapability: p.GRPCPlugin(logger)})
	t.Cleanup(func() {
		// Close asks the plugin's controller to shut down, which stops
		// the server; stopping it here as well would race with that.
		_ = client.Close()
		if t.Failed() {
			t.Logf("plugintest: log of in-process plugin %s:\n%s", p.Name, logs.String())
		}
	})
	raw, err := client.Dispense(wire.KindCapability)
	if err != nil {
		t.Fatalf("plugintest: in-process plugin %s: %v", p.Name, err)
	}
	conn, ok := raw.(*wire.CapabilityConn)
	if !ok {
		t.Fatalf("plugintest: unexpected plugin client %T", raw)
	}
	// The plugin shares the test's process: it cannot exit alone.
	return newHandle(t, conn, func() bool { return false }, hostFn)
}

// runTokens are the run tokens the kit gave, by run id.
type runTokens struct {
	mu sync.Mutex
	m  map[string]wop.RunToken
}

// bind returns the token of run: token when it is set (and makes it the
// run's), otherwise the run's, made on first use. A call without a run id
// gets none.
func (r *runTokens) bind(run string, token wop.RunToken) wop.RunToken {
	if run == "" {
		return token
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !token.IsZero() {
		r.m[run] = token
		return token
	}
	t, ok := r.m[run]
	if !ok {
		var b [32]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
		t = wop.NewRunToken(hex.EncodeToString(b[:]))
		r.m[run] = t
	}
	return t
}

// check refuses a callback that names a run the kit invoked without that
// run's token, as the host does. Other run ids pass to the test's
// HostServicesFunc.
func (r *runTokens) check(call wop.CallContext, family, method string) error {
	r.mu.Lock()
	t, ok := r.m[call.RunID]
	r.mu.Unlock()
	if !ok || t.Matches(call.Token) {
		return nil
	}
	why := "a run token that is not the run's"
	if call.Token.IsZero() {
		why = "no run token"
	}
	return wop.Errorf(wop.CodeCapabilityNotDeclared, "plugintest: the callback names run %s but carries %s; "+
		"a plugin's callbacks must send back the call context it was invoked with, run_token included "+
		"(in Go, call through req.Host with the handler's ctx)", call.RunID, why).WithCapability("host." + family + "." + method)
}

// hostServices serves a HostServicesFunc as the HostServices gRPC service.
type hostServices struct {
	wophostv1.UnimplementedHostServicesServer
	fn     HostServicesFunc
	tokens *runTokens
}

func (h hostServices) Call(ctx context.Context, req *wophostv1.CallRequest) (*wophostv1.CallResponse, error) {
	call := wire.CallContextFromProto(req.GetCall())
	if err := h.tokens.check(call, req.GetFamily(), req.GetMethod()); err != nil {
		return nil, wire.ToStatus(err)
	}
	out, err := h.fn(ctx, req.GetFamily(), req.GetMethod(), req.GetPayload(), call)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &wophostv1.CallResponse{Result: out}, nil
}

func refuseHostServices(_ context.Context, family, method string, _ []byte, _ wop.CallContext) ([]byte, error) {
	return nil, wop.NotProvided("host." + family + "." + method)
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

func joinDiagnostics(ds []Diagnostic) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, "; ")
}

// logBuffer keeps the last logLimit bytes written to it.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - logLimit; over > 0 {
		l.buf = l.buf[over:]
		// Drop the partial line left at the front.
		if i := bytes.IndexByte(l.buf, '\n'); i >= 0 {
			l.buf = l.buf[i+1:]
		}
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
