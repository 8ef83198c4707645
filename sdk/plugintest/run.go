package plugintest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/admission"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/internal/direct"
	"github.com/wophost/wophost/sdk/internal/records"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// Names the error checks use; unlikely enough to be served by accident.
const (
	unknownMethod = "plugintest-no-such-method"
	unknownFamily = "plugintest.no-such-family"
)

// Run starts a fresh process of cfg.Binary and runs the protocol checks
// against it, each as a subtest, in this order:
//
//   - Describe: name, version and well-formed families.
//   - PureMethods: every method a family declares pure is one it lists,
//     and a core family declares none (the contract fixes them).
//   - ConfigSchema: a well-formed schema.Block.
//   - InvokeBeforeConfigure: refused with code unavailable.
//   - Configure: cfg.Config accepted, facets for every family, those of
//     a core family a valid record (aienvelope.CheckFacets, ...).
//   - Invoke: every cfg.Calls entry succeeds with JSON (and passes Check).
//   - Errors: not_found for an unknown method or family, validation_error
//     for a malformed payload.
//   - Deadline: an expired deadline gives deadline_exceeded, a generous one
//     succeeds.
//   - DirectChannel (a plugin whose Describe sets direct_channel): the
//     first sample call served on the channel under a grant, a forged
//     grant and an ended run's refused, EndRun, relayed calls; and
//     Refusal: each row of the admission table (admission.Refusals)
//     refused on the channel with the host's code and message, a rule
//     per row.
//   - KeepsServing: a call still succeeds after the errors.
//
// The checks after Configure are skipped if Configure fails. Check runs
// the same checks outside a test.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	runProtocol(testingT{t}, cfg)
}

// runProtocol runs Run's checks and returns Describe's answer, nil when
// Describe failed.
func runProtocol(t checkT, cfg Config) *Description {
	t.Helper()
	if len(cfg.Calls) == 0 {
		t.Fatal("plugintest: Config.Calls is empty; give at least one sample call that succeeds")
	}
	c := &protocolChecks{cfg: cfg, first: cfg.Calls[0]}
	c.p = start(t, cfg)

	t.Run("Describe", "Describe answers a name, a version and at least one family; each family is a core family or a vendor family \"org.name\", listed once, with its methods and a valid record (status, since, until, witness).", c.describe)
	t.Run("PureMethods", "Every pure method a family declares is one of its methods, and a core family declares none: the contract fixes them.", c.pureMethods)
	t.Run("ConfigSchema", "ConfigSchema answers a well-formed schema: every attribute named and typed, nested blocks of single, list or map nesting, no name used twice.", c.configSchema)
	t.Run("InvokeBeforeConfigure", "A call before Configure is refused with code unavailable.", c.invokeBeforeConfigure)
	t.Run("Configure", "Configure accepts the config and returns facets for every family Describe lists, and for no other; a core family's facets make a record OpenWOP admits.", c.configure)
	t.Run("Invoke", "Every sample call succeeds with a JSON result, or fails with the code it expects.", c.invokeCalls)
	t.Run("Errors", "Errors travel in the envelope: not_found for an unknown method or family, validation_error for a malformed payload.", c.errorReplies)
	t.Run("Deadline", "The plugin keeps the call's deadline: refused with deadline_exceeded once it passed, served when it is far.", c.deadline)
	t.Run("DirectChannel", "A plugin that says in Describe that it serves a direct channel answers one when Configure asks, serves the first sample call there under a grant of the configured key, refuses a forged grant and the grant of a run that ended, hands over the run's call at EndRun, and serves the call relayed by the host under the key but not under another.", c.directChannel)
	t.Run("KeepsServing", "After the failed calls the plugin still runs and serves the first sample call.", c.keepsServing)
	return c.desc
}

// protocolChecks is one run of Run's checks against one plugin process.
type protocolChecks struct {
	cfg   Config
	first Call // the sample call the error and deadline checks vary
	p     *Plugin
	// desc is Describe's answer, nil if Describe failed.
	desc *Description
	// configured says Configure succeeded; the checks after it need it.
	configured bool
	// directKey and directEndpoint are the grant key Configure sent a
	// plugin that serves a direct channel, and where it serves it.
	directKey      []byte
	directEndpoint *wophostv1.DirectChannelEndpoint
	// rules are the rules of each family Describe lists, as the host
	// sends them in the direct channel's settings.
	rules  map[string]admission.Rules
	facets map[string]map[string]json.RawMessage
}

func (c *protocolChecks) describe(t checkT) {
	c.desc = c.p.describe(t)
	for _, pr := range descriptionProblems(c.desc) {
		t.Error(pr)
	}
}

func (c *protocolChecks) pureMethods(t checkT) {
	if c.desc == nil {
		t.Skip("skipped: Describe failed")
	}
	for _, pr := range pureProblems(c.desc) {
		t.Error(pr)
	}
}

// pureProblems lists the pure_methods of d a host refuses: on a core
// family, or naming a method the family does not list. A replay runs a
// pure method live on the plugin's word, so the host fails the capability.
func pureProblems(d *Description) []string {
	var out []string
	for _, f := range d.Families {
		if len(f.PureMethods) > 0 && wop.IsCoreFamily(f.Name) {
			out = append(out, fmt.Sprintf("family %s declares pure methods %q: the contract fixes the pure methods of a core family, which declares none", f.Name, f.PureMethods))
			continue
		}
		for _, m := range f.PureMethods {
			if !slices.Contains(f.Methods, m) {
				out = append(out, fmt.Sprintf("family %s declares the pure method %q, which it does not list in methods %q", f.Name, m, f.Methods))
			}
		}
	}
	return out
}

func (c *protocolChecks) configSchema(t checkT) {
	for _, pr := range schemaProblems(c.p.configSchema(t), "") {
		t.Error(pr)
	}
}

func (c *protocolChecks) invokeBeforeConfigure(t checkT) {
	first := c.first
	_, err := invokeSample(t, c.p, first)
	if err == nil {
		t.Fatalf("%s.%s succeeded before Configure; a plugin must refuse every call with code %s until it is configured",
			first.Family, first.Method, wop.CodeUnavailable)
	}
	if code := wop.CodeOf(err); code != wop.CodeUnavailable {
		t.Errorf("%s.%s before Configure: got %v; want code %s: a plugin must not serve before it is configured",
			first.Family, first.Method, err, wop.CodeUnavailable)
	}
}

func (c *protocolChecks) configure(t checkT) {
	// A plugin that serves a direct channel is asked for one, as the host
	// asks it: a second Configure could not take a store the first holds.
	var settings *wophostv1.DirectChannelSettings
	if c.desc != nil && c.desc.DirectChannel {
		c.directKey, c.rules = direct.NewKey(), hostwire.FamilyRules(c.desc.Families)
		settings = &wophostv1.DirectChannelSettings{GrantKey: c.directKey, SocketDir: c.p.socketDir, Rules: direct.RulesToProto(c.rules)}
	}
	res, ep := c.p.configureDirectOrNot(t, c.cfg.Config, settings)
	facets := res.Facets
	c.facets, c.directEndpoint = facets, ep
	c.configured = true
	if c.desc == nil {
		return
	}
	for _, pr := range facetProblems(c.desc, facets) {
		t.Error(pr)
	}
}

// needConfigured skips t when Configure failed.
func (c *protocolChecks) needConfigured(t checkT) {
	t.Helper()
	if !c.configured {
		t.Skip("skipped: Configure failed")
	}
}

func (c *protocolChecks) invokeCalls(t checkT) {
	c.needConfigured(t)
	for _, call := range c.cfg.Calls {
		t.Run(call.Family+"."+call.Method, callText(call), func(t checkT) { c.invokeCall(t, call) })
	}
}

// callText is the rule the sample call is checked against.
func callText(call Call) string {
	if call.WantCode != "" {
		return fmt.Sprintf("The sample call %s.%s fails with code %s.", call.Family, call.Method, call.WantCode)
	}
	if len(call.WantResult) > 0 {
		return fmt.Sprintf("The sample call %s.%s succeeds with a result containing %s.", call.Family, call.Method, call.WantResult)
	}
	return fmt.Sprintf("The sample call %s.%s succeeds with a JSON result.", call.Family, call.Method)
}

// invokeCall makes the sample call and checks it succeeds with JSON that
// passes its Check, or fails with its WantCode.
func (c *protocolChecks) invokeCall(t checkT, call Call) {
	if c.desc != nil && !describes(c.desc, call.Family, call.Method) {
		t.Errorf("Describe does not list method %s of family %s", call.Method, call.Family)
	}
	res, err := invokeSample(t, c.p, call)
	if call.WantCode != "" {
		if why := checkWantCode(call.Family, call.WantCode); why != "" {
			t.Fatalf("WantCode %q of %s.%s: %s", call.WantCode, call.Family, call.Method, why)
		}
		if got := wop.CodeOf(err); got != call.WantCode {
			t.Fatalf("%s.%s with payload %s: got %s; want it to fail with code %s (the plugin's vendor codes must follow OpenWOP's grammar)",
				call.Family, call.Method, orEmptyObject(call.Payload), orSuccess(err), call.WantCode)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s.%s with payload %s failed: %s", call.Family, call.Method, orEmptyObject(call.Payload), formatError(err))
	}
	if !json.Valid(res) {
		t.Fatalf("%s.%s returned a result that is not valid JSON: %q", call.Family, call.Method, res)
	}
	if len(call.WantResult) > 0 && !jsonContains(res, call.WantResult) {
		t.Errorf("%s.%s returned %s; want a result containing %s", call.Family, call.Method, res, call.WantResult)
	}
	if call.Check != nil {
		call.Check(t.asTB(), res)
	}
}

func (c *protocolChecks) errorReplies(t checkT) {
	c.needConfigured(t)
	first := c.first
	families := []string{first.Family}
	if c.desc != nil && len(c.desc.Families) > 0 {
		families = families[:0]
		for _, f := range c.desc.Families {
			families = append(families, f.Name)
		}
	}
	for _, fam := range families {
		t.Run("UnknownMethod/"+fam, "A call of an unknown method of "+fam+" is refused with not_found, naming the capability.", func(t checkT) {
			_, err := invoke(t, c.p, fam, unknownMethod, nil, time.Now().Add(rpcTimeout))
			we := expectCode(t, err, wop.CodeNotFound, "an unknown method of family "+fam)
			if we != nil && we.Capability == "" {
				t.Errorf("not_found for an unknown method names no capability; set it to %q", "host."+fam+"."+unknownMethod)
			}
		})
	}
	t.Run("UnknownFamily", "A call of a family the plugin does not serve is refused with not_found.", func(t checkT) {
		_, err := invoke(t, c.p, unknownFamily, first.Method, nil, time.Now().Add(rpcTimeout))
		expectCode(t, err, wop.CodeNotFound, "an unknown family")
	})
	t.Run("MalformedPayload", "A payload that is not JSON is refused with validation_error.", func(t checkT) {
		_, err := invoke(t, c.p, first.Family, first.Method, json.RawMessage("{"), time.Now().Add(rpcTimeout))
		expectCode(t, err, wop.CodeValidation, fmt.Sprintf("%s.%s with the malformed payload %q", first.Family, first.Method, "{"))
	})
}

func (c *protocolChecks) deadline(t checkT) {
	c.needConfigured(t)
	t.Run("Expired", "A call whose deadline passed is refused with deadline_exceeded.", c.deadlineExpired)
	t.Run("CallContextExpired", "A call whose call-context deadline (the run's) passed is refused with deadline_exceeded, even when the transport's deadline is later.", c.deadlineCallContextExpired)
	t.Run("Generous", "The first sample call with a deadline "+rpcTimeout.String()+" away succeeds with JSON.", c.deadlineGenerous)
}

// deadlineExpired pins the error a caller sees: grpc-go refuses an expired
// context before sending; deadlineCallContextExpired checks the plugin's
// own handling.
func (c *protocolChecks) deadlineExpired(t checkT) {
	first := c.first
	past := time.Now().Add(-time.Second)
	_, err := invoke(t, c.p, first.Family, first.Method, first.Payload, past)
	if err == nil {
		t.Fatalf("%s.%s succeeded although its deadline had passed; want code %s", first.Family, first.Method, wop.CodeDeadlineExceeded)
	}
	if code := wop.CodeOf(err); code != wop.CodeDeadlineExceeded {
		t.Errorf("%s.%s with a passed deadline: got %s; want code %s", first.Family, first.Method, formatError(err), wop.CodeDeadlineExceeded)
	}
}

// deadlineCallContextExpired: the call context's deadline is the run's: a
// plugin must refuse a call whose run deadline passed even when the
// transport's deadline is later (a re-dispatched call, a slow hop).
func (c *protocolChecks) deadlineCallContextExpired(t checkT) {
	first := c.first
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	defer cancel()
	call := wop.CallContext{RunID: "plugintest-run", Caller: "pack:plugintest", Depth: 1, Deadline: time.Now().Add(-time.Second)}
	_, err := c.p.Invoke(ctx, first.Family, first.Method, orEmptyObject(first.Payload), call)
	if err == nil {
		t.Fatalf("%s.%s with a passed call-context deadline succeeded; want code %s", first.Family, first.Method, wop.CodeDeadlineExceeded)
	}
	if code := wop.CodeOf(err); code != wop.CodeDeadlineExceeded {
		t.Errorf("%s.%s with a passed call-context deadline: got %s; want code %s", first.Family, first.Method, formatError(err), wop.CodeDeadlineExceeded)
	}
}

func (c *protocolChecks) deadlineGenerous(t checkT) {
	first := c.first
	res, err := invoke(t, c.p, first.Family, first.Method, first.Payload, time.Now().Add(rpcTimeout))
	if err != nil {
		t.Fatalf("%s.%s with a deadline %s away failed: %s", first.Family, first.Method, rpcTimeout, formatError(err))
	}
	if !json.Valid(res) {
		t.Errorf("%s.%s returned a result that is not valid JSON: %q", first.Family, first.Method, res)
	}
}

func (c *protocolChecks) keepsServing(t checkT) {
	c.needConfigured(t)
	if c.p.Exited() {
		t.Fatal("the plugin process exited during the checks")
	}
	if _, err := invokeSample(t, c.p, c.first); err != nil {
		t.Fatalf("%s.%s failed after the error checks: %s; a plugin must keep serving after a failed call", c.first.Family, c.first.Method, formatError(err))
	}
}

// invokeSample makes c with a deadline far enough away not to matter.
func invokeSample(t tb, p *Plugin, c Call) (json.RawMessage, error) {
	return invoke(t, p, c.Family, c.Method, c.Payload, time.Now().Add(rpcTimeout))
}

// invoke calls the plugin with a call context like the host's, with the
// same deadline on the gRPC context and in the call context.
func invoke(t tb, p *Plugin, family, method string, payload json.RawMessage, deadline time.Time) (json.RawMessage, error) {
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	call := wop.CallContext{
		RunID:    "plugintest-run",
		NodeID:   "plugintest-node",
		TypeID:   "plugintest.node",
		Pack:     "plugintest",
		Caller:   "pack:plugintest",
		Depth:    1,
		Deadline: deadline,
	}
	return p.Invoke(ctx, family, method, orEmptyObject(payload), call)
}

// invokeJSON makes the call of family.method with req as its JSON payload
// and the kit's RPC timeout.
func (p *Plugin) invokeJSON(t checkT, family, method string, req any, call wop.CallContext) (json.RawMessage, error) {
	t.Helper()
	payload, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	defer cancel()
	return p.Invoke(ctx, family, method, payload, call)
}

// expectCode fails t unless err is a *wop.Error with code and a message,
// and returns it when it is one.
func expectCode(t checkT, err error, code, what string) *wop.Error {
	t.Helper()
	if err == nil {
		t.Errorf("%s succeeded; want code %s", what, code)
		return nil
	}
	we := wop.AsError(err)
	if we.Code != code {
		t.Errorf("%s: got %s; want code %s", what, formatError(err), code)
		return nil
	}
	if strings.TrimSpace(we.Message) == "" {
		t.Errorf("%s: the %s error has an empty message", what, code)
	}
	return we
}

// formatError shows every field of the error envelope, since the failing
// field is often not the code.
// orSuccess formats err, or says the call succeeded.
func orSuccess(err error) string {
	if err == nil {
		return "success"
	}
	return formatError(err)
}

func formatError(err error) string {
	we := wop.AsError(err)
	s := fmt.Sprintf("code=%q message=%q capability=%q retryable=%t", we.Code, we.Message, we.Capability, we.Retryable)
	if len(we.Details) > 0 {
		s += fmt.Sprintf(" details=%s", we.Details)
	}
	return s
}

func describes(d *Description, family, method string) bool {
	for _, f := range d.Families {
		if f.Name == family {
			return slices.Contains(f.Methods, method)
		}
	}
	return false
}

// describedFamily returns p's description of family, failing t if p does
// not describe it.
func describedFamily(t checkT, p *Plugin, family string) FamilyDescription {
	t.Helper()
	desc := p.describe(t)
	i := slices.IndexFunc(desc.Families, func(f FamilyDescription) bool { return f.Name == family })
	if i < 0 {
		t.Fatalf("the plugin does not describe the %s family", family)
	}
	return desc.Families[i]
}

// descriptionProblems lists what is wrong with a Describe answer.
func descriptionProblems(d *Description) []string {
	var out []string
	if strings.TrimSpace(d.Name) == "" {
		out = append(out, "Describe: name is empty")
	}
	if strings.TrimSpace(d.Version) == "" {
		out = append(out, "Describe: version is empty")
	}
	if len(d.Families) == 0 {
		out = append(out, "Describe: no families; a plugin must serve at least one")
	}
	seen := map[string]bool{}
	for i, f := range d.Families {
		name := f.Name
		switch {
		case name == "":
			out = append(out, fmt.Sprintf("family %d: name is empty", i))
			name = fmt.Sprintf("#%d", i)
		case seen[name]:
			out = append(out, fmt.Sprintf("family %s is listed more than once", name))
		case !wop.IsCoreFamily(name):
			if ok, why := wop.ValidVendorFamily(name); !ok {
				out = append(out, fmt.Sprintf("family %q is not a core family (%s) nor a valid vendor family: %s",
					name, strings.Join(wop.CoreFamilies(), ", "), why))
			}
		}
		seen[name] = true
		// The host publishes the record as described, so it must be one
		// OpenWOP's discovery document admits.
		if err := wop.CheckFamilyRecord(f.Status, f.Since, f.Until, f.Witness); err != nil {
			out = append(out, fmt.Sprintf("family %s: %v", name, err))
		}
		if len(f.Methods) == 0 {
			out = append(out, fmt.Sprintf("family %s lists no methods", name))
		}
		methods := map[string]bool{}
		for _, m := range f.Methods {
			switch {
			case m == "":
				out = append(out, fmt.Sprintf("family %s lists an empty method name", name))
			case methods[m]:
				out = append(out, fmt.Sprintf("family %s lists method %s more than once", name, m))
			}
			methods[m] = true
		}
	}
	return out
}

// schemaProblems lists what is wrong with a config schema block; path
// names the block in the messages.
func schemaProblems(b schema.Block, path string) []string {
	where := "config schema"
	if path != "" {
		where += " block " + path
	}
	var out []string
	// Attributes and nested blocks share one namespace in an HCL body.
	names := map[string]bool{}
	for i, a := range b.Attributes {
		switch {
		case strings.TrimSpace(a.Name) == "":
			out = append(out, fmt.Sprintf("%s: attribute %d has no name", where, i))
		case names[a.Name]:
			out = append(out, fmt.Sprintf("%s: name %q is used more than once", where, a.Name))
		}
		names[a.Name] = true
		if strings.TrimSpace(string(a.Type)) == "" {
			out = append(out, fmt.Sprintf("%s: attribute %q has no type", where, a.Name))
		}
	}
	for i, nb := range b.Blocks {
		switch {
		case strings.TrimSpace(nb.TypeName) == "":
			out = append(out, fmt.Sprintf("%s: nested block %d has no typeName", where, i))
		case names[nb.TypeName]:
			out = append(out, fmt.Sprintf("%s: name %q is used more than once", where, nb.TypeName))
		}
		names[nb.TypeName] = true
		switch nb.Nesting {
		case schema.NestingSingle, schema.NestingList, schema.NestingMap:
		default:
			out = append(out, fmt.Sprintf("%s: nested block %q has nesting %q; want single, list or map", where, nb.TypeName, nb.Nesting))
		}
		sub := nb.TypeName
		if path != "" {
			sub = path + "." + sub
		}
		out = append(out, schemaProblems(nb.Block, sub)...)
	}
	return out
}

// facetProblems lists the families whose facets Configure left out or
// added, and the core families whose facets make a record the host
// refuses to advertise (aienvelope.CheckFacets and its siblings).
func facetProblems(d *Description, facets map[string]map[string]json.RawMessage) []string {
	var out []string
	described := map[string]bool{}
	for _, f := range d.Families {
		described[f.Name] = true
		ff, ok := facets[f.Name]
		if !ok {
			out = append(out, fmt.Sprintf("Configure returned no facets for family %s; send {} for a family without facets", f.Name))
			continue
		}
		if err := records.Check(f.Name, ff); err != nil {
			out = append(out, fmt.Sprintf("Configure returned facets for family %s that make an invalid record, which a host refuses to advertise: %v", f.Name, err))
		}
	}
	for fam := range facets {
		if !described[fam] {
			out = append(out, fmt.Sprintf("Configure returned facets for family %s, which Describe does not list", fam))
		}
	}
	slices.Sort(out)
	return out
}
