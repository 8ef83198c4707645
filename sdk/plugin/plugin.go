// Package plugin is what a vendor imports to write a capability plugin: a
// binary that serves one or more host-service families to the wophost host.
//
// A plugin's main only builds a Plugin and calls Serve. Nothing may write to
// stdout before Serve: the first line there is the handshake.
package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/strictjson"
	"github.com/wophost/wophost/sdk/wop"
)

// Plugin describes a capability plugin.
type Plugin struct {
	// Name and Version identify the plugin in the host's listings.
	Name    string
	Version string
	// Families are the families the plugin can serve.
	Families []*Family
	// ConfigSchema is the shape of the plugin's `config {}` block. The host
	// decodes the operator's HCL against it and passes the result as JSON.
	ConfigSchema schema.Block
	// Configure receives the decoded config before any call. It may be nil
	// for a plugin without config. Returning a *ConfigError points the
	// operator at the offending attribute.
	//
	// To be called again later, when something Configure needs cannot be
	// reached now but may come back by itself (its database is down),
	// return wop.Errorf(wop.CodeUnavailable, ...).WithRetryable(true): the
	// host keeps the capability waiting, its families not advertised, and
	// calls Configure again on the same process with backoff until it
	// succeeds. Configure must therefore be safe to call again. Any other
	// error fails the capability.
	Configure func(ctx context.Context, req *ConfigureRequest) error
	// Shutdown, if set, runs once when the host stops the plugin.
	Shutdown func()
	// SingleWriter says that the plugin's state under StateDir admits one
	// process at a time (a database file it locks, a journal it appends
	// to). The host then never runs a second process of the capability
	// beside a running one: a reload drains and stops the old process
	// before it starts the new one. Leave it false for a stateless plugin,
	// which a reload replaces beside the old process with no gap.
	SingleWriter bool
	// RoutedOnly keeps every call to the plugin on the host's routed path
	// and on gRPC: the plugin does not offer the host a direct channel
	// (see docs/direct-channels.md), so each call reaches it relayed by
	// the host as Invoke on its gRPC connection. Leave it false: the SDK
	// checks every call on a direct channel against the host's grant, as
	// the host would, and takes the host's relayed calls there too.
	RoutedOnly bool
}

// Family is one family a plugin serves.
type Family struct {
	// Name is a core family ("aiEnvelope", ...) or a vendor family
	// "org.name".
	Name string
	// Status, Since, Until and Witness make the family's record in the
	// host's discovery document. Status is wop.StatusStable,
	// wop.StatusExperimental or wop.StatusDeprecated; Since is the
	// protocol version the record dates from ("2.0"); Until is when a
	// non-stable record lapses (a protocol version or a date such as
	// "2027-06-30") and is left empty on a stable one; Witness is one of
	// the wop.Witness* classes, how a client can check the family's
	// promises. Serve refuses a record wop.CheckFamilyRecord refuses, and so does
	// the host.
	Status  string
	Since   string
	Until   string
	Witness string
	// Methods maps each method name to its handler.
	Methods map[string]Handler
	// Pure names the methods, among Methods, that change nothing anywhere
	// and answer the same request the same way (a read of the family's
	// state, say). When the host replays a run it runs them live and
	// compares their answers with the run's; every other method is
	// side-effecting and answered from the run's log on replay, so leave a
	// method out unless it is truly pure. Only a vendor family declares
	// Pure: the contract fixes the pure methods of the core families, and
	// Serve refuses Pure on one, as it refuses a name not in Methods.
	Pure []string
	// FacetRules say which methods need which of the family's facets
	// beside the family itself (a put that needs a "write" facet, say):
	// the host refuses a call from a node that did not declare the facet,
	// on the routed path and on the direct channel alike, before the
	// handler runs. A rule with When set applies only when the request's
	// top-level boolean member of that name is true; the host reads it
	// strictly (docs/protocol.md, Facet rules). Only a vendor family declares
	// FacetRules: the contract fixes those of the core families, and
	// Serve refuses them on one, as it refuses a method not in Methods.
	FacetRules []wop.FacetRule
	// Facets, if set, returns the facets the family serves under the
	// current configuration. It is called after Configure; each value is
	// marshalled to JSON ({} for a facet without settings).
	Facets func() map[string]any
	// Details, if set, returns what the operator may want to know about
	// the family under the current configuration but is no facet (the
	// servers an MCP client reaches, say). It is called after Configure;
	// the host lists it with the capability (GET /v1/plugins, `host
	// plugins --json`) and never advertises it.
	Details func() map[string]any
	// Needs and Uses are what the family's handlers may call back in the
	// host. Needs lists families, or "family.facet", without which the
	// family cannot work: the host advertises it only while each is
	// advertised (agentRuntime needs aiEnvelope). Uses lists families the
	// handlers call when they are there and do without otherwise (the MCP
	// plugin answers sampling through aiEnvelope when it can). A callback
	// to a family in neither list is refused, capability_not_declared.
	Needs []string
	Uses  []string
	// Codes lists the vendor error codes the family's handlers return
	// besides the contract's core codes (wop.CoreCodes). Each follows
	// OpenWOP's vendor-code grammar, "org.name" with exactly one dot
	// ("acme.key_not_found"), and for a vendor family "org.family" its org
	// is the family's org; Serve refuses to start otherwise. A core family
	// may also return its contract family codes (snake_case, no dot, e.g.
	// provider_rate_limited) without listing them. A handler error with
	// any other code reaches the host as internal, the code it had in
	// details.code, and is logged: a malformed code never crosses the
	// wire. A handler that relays another family's vendor error should
	// wrap it (wop.Error.WithCause) rather than return it as its own.
	Codes []string
}

// checkCodes returns an error naming the family and the code when one of
// f's declared codes breaks the vendor-code grammar or, for a vendor
// family, belongs to another org.
func (f *Family) checkCodes() error {
	org := ""
	if !wop.IsCoreFamily(f.Name) {
		org, _, _ = strings.Cut(f.Name, ".")
	}
	for _, c := range f.Codes {
		if !wop.ValidVendorCode(c) {
			return fmt.Errorf(`family %q declares the error code %q: a vendor error code is "org.name" with exactly one dot, lowercase, e.g. "acme.key_not_found"`, f.Name, c)
		}
		if codeOrg, _, _ := strings.Cut(c, "."); org != "" && codeOrg != org {
			return fmt.Errorf("family %q declares the error code %q: its org must be the family's, %q", f.Name, c, org)
		}
	}
	return nil
}

// checkPure returns an error naming the family and the method when f
// declares pure methods on a core family or a pure method it does not
// serve.
func (f *Family) checkPure() error {
	if len(f.Pure) > 0 && wop.IsCoreFamily(f.Name) {
		return fmt.Errorf("family %q declares the pure method %q: the contract fixes the pure methods of a core family; leave Pure empty", f.Name, f.Pure[0])
	}
	for _, m := range f.Pure {
		if _, ok := f.Methods[m]; !ok {
			return fmt.Errorf("family %q declares the pure method %q, which is not one of its Methods", f.Name, m)
		}
	}
	return nil
}

// allows reports whether a handler of f may return code: a core code, a
// declared code, or for a core family a contract family code.
func (f *Family) allows(code string) bool {
	if slices.Contains(wop.CoreCodes(), code) || slices.Contains(f.Codes, code) {
		return true
	}
	return wop.IsCoreFamily(f.Name) && familyCode.MatchString(code)
}

// familyCode is the shape of the contract's family codes (RFC 0144):
// snake_case without a dot.
var familyCode = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Handler serves one method. Its result is marshalled to JSON (a
// json.RawMessage is sent as it is). Errors should be *wop.Error values; any
// other error reaches the caller as "internal".
type Handler func(ctx context.Context, req *Request) (any, error)

// Request is one invocation of a method.
type Request struct {
	Family  string
	Method  string
	Payload json.RawMessage
	// Call identifies the node run the call belongs to. ctx carries it too,
	// so calls made through Host with ctx stay part of the run; its Token
	// is the run's secret, without which the host refuses a callback. Work
	// done for the run outside the handler's ctx keeps it by rebuilding a
	// context with wop.WithCallContext(ctx, req.Call).
	Call wop.CallContext
	// Host reaches the host's services. Calls are refused unless the family
	// lists the target in Needs or Uses.
	Host wop.Caller
	// Logger is the plugin's logger, with the run and node ids attached.
	Logger hclog.Logger
}

// Decode unmarshals the payload into v, refusing unknown fields, and
// returns a validation_error naming the offending field.
func (r *Request) Decode(v any) error {
	return strictjson.Decode(r.Payload, v, "request")
}

// Typed adapts a function over typed requests to a Handler.
func Typed[In, Out any](fn func(ctx context.Context, req *Request, in *In) (Out, error)) Handler {
	return func(ctx context.Context, req *Request) (any, error) {
		in := new(In)
		if err := req.Decode(in); err != nil {
			return nil, err
		}
		return fn(ctx, req, in)
	}
}

// ConfigureRequest carries the operator's configuration.
type ConfigureRequest struct {
	// Config is the plugin's config block as JSON.
	Config json.RawMessage
	// StateDir is a directory the plugin owns for durable state. It exists.
	StateDir string
	// Storage says where the operator wants durable state kept: under
	// StateDir (Backend "embedded") or in a PostgreSQL database
	// (Backend "postgres").
	Storage Storage
	// Host reaches the host's services.
	Host   wop.Caller
	Logger hclog.Logger

	// warnings are what Warn reported.
	warnings ConfigErrors
}

// Warn reports a problem of the config that does not stop the plugin from
// serving, such as one upstream of several that cannot be reached. Path
// names the attribute as for ConfigError. The host logs each warning at
// its place in the operator's file and lists it with the capability
// (`host plugins`, GET /v1/plugins) until the plugin is configured again.
func (r *ConfigureRequest) Warn(path []string, summary, detail string) {
	r.warnings = append(r.warnings, &ConfigError{Path: path, Summary: summary, Detail: detail})
}

// Decode unmarshals the config into v, refusing unknown fields.
func (r *ConfigureRequest) Decode(v any) error {
	if len(r.Config) == 0 {
		r.Config = json.RawMessage("{}")
	}
	return strictjson.Decode(r.Config, v, "config")
}

// ConfigError is a configuration problem found by the plugin. Path names
// the attribute (block type names, labels, list indexes and the attribute
// name) so the host can point at it in the operator's file.
type ConfigError struct {
	Path    []string
	Summary string
	Detail  string
}

// Error implements error.
func (e *ConfigError) Error() string {
	if e.Detail == "" {
		return e.Summary
	}
	return e.Summary + ": " + e.Detail
}

// ConfigErrors is several configuration problems reported together.
type ConfigErrors []*ConfigError

// Error implements error.
func (es ConfigErrors) Error() string {
	if len(es) == 0 {
		return "no config errors"
	}
	s := es[0].Error()
	if len(es) > 1 {
		s += " (and more)"
	}
	return s
}

// CheckConfig returns the ConfigErrors of every value of config outside
// the constraints s declares (schema.Attribute's Whole, Min, Max, Duration,
// OneOf...), worded as the host words them, or nil. The SDK runs it before
// Configure; a plugin's own tests that call their Configure function
// directly can run it first to see what the host would refuse.
func CheckConfig(s schema.Block, config json.RawMessage) error {
	if ces := constraintErrors(s, config); len(ces) > 0 {
		return ces
	}
	return nil
}

// constraintErrors is CheckConfig's list, empty when config keeps every
// constraint.
func constraintErrors(s schema.Block, config json.RawMessage) ConfigErrors {
	vs := s.CheckConfig(config)
	ces := make(ConfigErrors, len(vs))
	for i, v := range vs {
		name := v.Path[len(v.Path)-1]
		ces[i] = &ConfigError{Path: v.Path, Summary: "Invalid value for " + strconv.Quote(name), Detail: name + " " + v.Err.Error() + "."}
	}
	return ces
}
