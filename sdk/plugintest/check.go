package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// tb is what starting and configuring a plugin report to: testing.TB, or
// a rule of Check.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
	Context() context.Context
	TempDir() string
}

// checkT is what a check reports to: a *testing.T under go test
// (testingT), a rule of a Report under Check (ruleT).
type checkT interface {
	tb
	Error(args ...any)
	Errorf(format string, args ...any)
	Skip(args ...any)
	Name() string
	// Run runs f as the rule name, which text states, and reports whether
	// it passed.
	Run(name, text string, f func(checkT)) bool
	// asTB is the check as a testing.TB, for a Call's Check.
	asTB() testing.TB
}

// testingT runs the checks as subtests; the rule texts are the doc
// comments of Run and the family checks.
type testingT struct{ *testing.T }

func (t testingT) Run(name, _ string, f func(checkT)) bool {
	return t.T.Run(name, func(t *testing.T) { f(testingT{t}) })
}

func (t testingT) asTB() testing.TB { return t.T }

// asTB returns t as a testing.TB: itself, or a rule's adapter.
func asTB(t tb) testing.TB {
	switch t := t.(type) {
	case testing.TB:
		return t
	case checkT:
		return t.asTB()
	}
	panic(fmt.Sprintf("plugintest: %T is no testing.TB", t))
}

// Result is the outcome of one rule.
type Result string

// The results of a rule.
const (
	Pass Result = "pass"
	Fail Result = "fail"
	// Skip: the rule could not be checked because one it needs failed.
	Skip Result = "skip"
)

// Rule is one rule of a Report: a check of the kit, named as its subtest
// is under go test ("Protocol/Describe", "aiEnvelope/Generate").
type Rule struct {
	// Name is the rule's path; a rule whose name extends another's with
	// "/" is one of its parts, and fails whenever a part fails.
	Name string
	// Text states what the rule requires of the plugin.
	Text string
	// Result is whether the plugin kept the rule.
	Result Result
	// Detail says what broke the rule, or why it was skipped; empty when
	// it passed.
	Detail string
	// Log holds what the rule logged: the plugin's own log when a check
	// of the plugin it started failed.
	Log string
	// Err is the error that failed the rule when it is one a caller may
	// act on: a *StartError when the kit could not start the plugin, an
	// error wrapping a *hostwire.ExitError when the plugin exited during a
	// call before it served (Describe, ConfigSchema, Configure). nil
	// otherwise.
	Err error
}

// OK reports whether the rule did not fail (it passed or was skipped).
func (r Rule) OK() bool { return r.Result != Fail }

// Report is the outcome of Check: every rule in the order it ran.
type Report struct {
	Rules []Rule
}

// Failed reports whether a rule failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Rules, func(x Rule) bool { return x.Result == Fail })
}

// Failures lists the rules that failed and have no failed part, the ones
// that say what broke.
func (r *Report) Failures() []Rule {
	var out []Rule
	for _, x := range r.Rules {
		if x.Result != Fail {
			continue
		}
		if !slices.ContainsFunc(r.Rules, func(o Rule) bool { return o.Result == Fail && strings.HasPrefix(o.Name, x.Name+"/") }) {
			out = append(out, x)
		}
	}
	return out
}

// Suite is what Check runs against one plugin: the protocol checks (Run)
// with Config, and the contract checks of every core family the plugin
// describes or the Suite configures. The family checks start the plugin
// as Config says: its Binary, Args, InProcess, Env and StartTimeout
// replace the family configs' own.
type Suite struct {
	Config
	// AIEnvelope configures the aiEnvelope checks; nil runs them with
	// Config.Config when the plugin serves aiEnvelope. A nil Config in it
	// is Config.Config.
	AIEnvelope *AIEnvelopeConfig
	// PromptLibrary configures the promptLibrary checks, which need the
	// prompts the plugin serves: when the plugin serves promptLibrary and
	// this is nil, the rule "promptLibrary" fails. A nil Config in it is
	// Config.Config.
	PromptLibrary *PromptLibraryConfig
	// MCP configures the mcp checks, once per entry (one per server,
	// say), which need a server and a tool: when the plugin serves mcp
	// and this is empty, the rule "mcp" fails. A nil Config in an entry
	// is Config.Config.
	MCP []MCPConfig
	// AgentRuntime configures the agentRuntime checks; nil runs them with
	// Config.Config when the plugin serves agentRuntime. A nil Config in
	// it is Config.Config.
	AgentRuntime *AgentRuntimeConfig
}

// Check runs the checks of s outside a test and reports every rule: the
// protocol checks under "Protocol", then the contract checks of each core
// family under its name ("mcp/<server id>" for each MCP entry). It stops
// early only when ctx ends, which fails the rules still running. A plugin
// process Check starts is killed before it returns.
func Check(ctx context.Context, s Suite) *Report {
	r := &reporter{}
	root := &ruleT{r: r, ctx: ctx, index: -1}
	var desc *Description
	root.Run("Protocol", "The plugin speaks the wophost protocol: Describe, ConfigSchema, Configure and Invoke as a host uses them.", func(t checkT) {
		desc = runProtocol(t, s.Config)
	})
	served := func(family string) bool {
		return desc != nil && slices.ContainsFunc(desc.Families, func(f FamilyDescription) bool { return f.Name == family })
	}
	base := s.Config
	orConfig := func(c json.RawMessage) json.RawMessage {
		if c == nil {
			return base.Config
		}
		return c
	}
	if s.AIEnvelope != nil || served(wop.FamilyAIEnvelope) {
		cfg := AIEnvelopeConfig{}
		if s.AIEnvelope != nil {
			cfg = *s.AIEnvelope
		}
		cfg.Binary, cfg.Args, cfg.InProcess, cfg.Env, cfg.StartTimeout = base.Binary, base.Args, base.InProcess, base.Env, base.StartTimeout
		cfg.Config = orConfig(cfg.Config)
		root.Run(wop.FamilyAIEnvelope, "The plugin serves aiEnvelope as the contract requires (docs/contract.md §4.1).", func(t checkT) { aiEnvelopeRules(t, cfg) })
	}
	if s.PromptLibrary != nil || served(wop.FamilyPromptLibrary) {
		root.Run(wop.FamilyPromptLibrary, "The plugin serves promptLibrary as the contract requires (docs/contract.md §4.2).", func(t checkT) {
			if s.PromptLibrary == nil {
				t.Fatal("the plugin serves promptLibrary, whose checks need the prompts it serves: " +
					"give them (Suite.PromptLibrary; host conformance: a family \"promptLibrary\" block with a prompt block each)")
			}
			cfg := *s.PromptLibrary
			cfg.Binary, cfg.Args, cfg.InProcess, cfg.Env, cfg.StartTimeout = base.Binary, base.Args, base.InProcess, base.Env, base.StartTimeout
			cfg.Config = orConfig(cfg.Config)
			promptLibraryRules(t, cfg)
		})
	}
	if len(s.MCP) == 0 && served(wop.FamilyMCP) {
		root.Run(wop.FamilyMCP, "The plugin serves mcp as the contract requires (docs/contract.md §4.4).", func(t checkT) {
			t.Fatal("the plugin serves mcp, whose checks need a reachable server and one of its tools: " +
				"give them (Suite.MCP; host conformance: a family \"mcp\" block with server_id and tool)")
		})
	}
	for _, m := range s.MCP {
		cfg := m
		cfg.Binary, cfg.Args, cfg.InProcess, cfg.Env, cfg.StartTimeout = base.Binary, base.Args, base.InProcess, base.Env, base.StartTimeout
		cfg.Config = orConfig(cfg.Config)
		root.Run(wop.FamilyMCP+"/"+cfg.ServerID, "The plugin serves mcp with the server "+cfg.ServerID+" as the contract requires (docs/contract.md §4.4).", func(t checkT) { mcpRules(t, cfg) })
	}
	if s.AgentRuntime != nil || served(wop.FamilyAgentRuntime) {
		cfg := AgentRuntimeConfig{}
		if s.AgentRuntime != nil {
			cfg = *s.AgentRuntime
		}
		cfg.Binary, cfg.Args, cfg.InProcess, cfg.Env, cfg.StartTimeout = base.Binary, base.Args, base.InProcess, base.Env, base.StartTimeout
		cfg.Config = orConfig(cfg.Config)
		root.Run(wop.FamilyAgentRuntime, "The plugin serves agentRuntime as the contract requires (docs/contract.md §4.3).", func(t checkT) { agentRuntimeRules(t, cfg) })
	}
	return &Report{Rules: r.rules}
}

// reporter collects the rules of one Check in the order they start.
type reporter struct {
	mu    sync.Mutex
	rules []Rule
}

// ruleT is one rule of a Check: a check runs in a goroutine of its own,
// which Fatal and Skip end, as a subtest's does under go test.
type ruleT struct {
	r      *reporter
	parent *ruleT
	index  int // in r.rules; -1 for the root, which is no rule
	name   string
	ctx    context.Context

	mu       sync.Mutex
	failed   bool
	skipped  bool
	err      error
	msgs     []string
	logs     []string
	cleanups []func()
	subNames map[string]int
}

func (t *ruleT) Helper() {}

func (t *ruleT) Name() string { return t.name }

func (t *ruleT) Context() context.Context { return t.ctx }

func (t *ruleT) report(msg string, fail bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = append(t.msgs, strings.TrimRight(msg, "\n"))
	if fail {
		t.failed = true
	}
}

func (t *ruleT) Error(args ...any) { t.report(fmt.Sprintln(args...), true) }

func (t *ruleT) Errorf(format string, args ...any) { t.report(fmt.Sprintf(format, args...), true) }

func (t *ruleT) Fatal(args ...any) {
	t.Error(args...)
	runtime.Goexit()
}

func (t *ruleT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

// fatal fails t with err, which a rule of Check keeps as its Err.
func fatal(t tb, err error) {
	t.Helper()
	if r, ok := t.(*ruleT); ok {
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	t.Fatal(err)
}

func (t *ruleT) Skip(args ...any) {
	t.report(fmt.Sprintln(args...), false)
	t.mu.Lock()
	t.skipped = true
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *ruleT) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs = append(t.logs, strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

func (t *ruleT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *ruleT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *ruleT) TempDir() string {
	dir, err := os.MkdirTemp("", "plugintest-")
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Run runs f in a goroutine of its own, as testing does, so that Fatal
// and Skip end only this rule; a panic fails the rule instead of the
// program.
func (t *ruleT) Run(name, text string, f func(checkT)) bool {
	full := t.subName(name)
	ctx, cancel := context.WithCancel(t.ctx)
	c := &ruleT{r: t.r, parent: t, name: full, ctx: ctx}
	t.r.mu.Lock()
	c.index = len(t.r.rules)
	t.r.rules = append(t.r.rules, Rule{Name: full, Text: text})
	t.r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.finish(cancel)
		if err := ctx.Err(); err != nil {
			c.Fatalf("not run: %v", err)
		}
		f(c)
	}()
	<-done
	return !c.Failed()
}

// subName is name made unique among t's rules, as testing does with
// "#01", and prefixed with t's name.
func (t *ruleT) subName(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subNames == nil {
		t.subNames = map[string]int{}
	}
	n := t.subNames[name]
	t.subNames[name] = n + 1
	if n > 0 {
		name = fmt.Sprintf("%s#%02d", name, n)
	}
	if t.name != "" {
		name = t.name + "/" + name
	}
	return name
}

// finish ends the rule: a panic fails it, its context ends, its
// cleanups run last first, and its result is recorded and a failure
// passed on to the rules it is part of.
func (t *ruleT) finish(cancel context.CancelFunc) {
	if p := recover(); p != nil {
		t.report(fmt.Sprintf("panic: %v\n%s", p, debug.Stack()), true)
	}
	cancel()
	t.mu.Lock()
	cleanups := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	t.mu.Lock()
	rule := Rule{Result: Pass, Detail: strings.Join(t.msgs, "\n"), Log: strings.Join(t.logs, "\n")}
	switch {
	case t.failed:
		rule.Result, rule.Err = Fail, t.err
	case t.skipped:
		rule.Result = Skip
	default:
		rule.Detail = ""
	}
	failed := t.failed
	t.mu.Unlock()
	t.r.mu.Lock()
	rule.Name, rule.Text = t.r.rules[t.index].Name, t.r.rules[t.index].Text
	t.r.rules[t.index] = rule
	t.r.mu.Unlock()
	for p := t.parent; failed && p != nil; p = p.parent {
		p.mu.Lock()
		p.failed = true
		p.mu.Unlock()
	}
}

func (t *ruleT) asTB() testing.TB { return &ruleTB{t: t} }

// ruleTB is a rule as a testing.TB, for a Call's Check. The embedded
// interface is nil: it only supplies testing.TB's unexported method, and
// every method is defined here.
type ruleTB struct {
	testing.TB
	t *ruleT
}

func (b *ruleTB) ArtifactDir() string               { return b.t.TempDir() }
func (b *ruleTB) Attr(key, value string)            { b.t.Logf("%s: %s", key, value) }
func (b *ruleTB) Cleanup(f func())                  { b.t.Cleanup(f) }
func (b *ruleTB) Error(args ...any)                 { b.t.Error(args...) }
func (b *ruleTB) Errorf(format string, args ...any) { b.t.Errorf(format, args...) }
func (b *ruleTB) Fail()                             { b.t.report("failed", true) }
func (b *ruleTB) FailNow()                          { b.t.Fatal("failed") }
func (b *ruleTB) Failed() bool                      { return b.t.Failed() }
func (b *ruleTB) Fatal(args ...any)                 { b.t.Fatal(args...) }
func (b *ruleTB) Fatalf(format string, args ...any) { b.t.Fatalf(format, args...) }
func (b *ruleTB) Helper()                           {}
func (b *ruleTB) Log(args ...any)                   { b.t.Logf("%s", fmt.Sprintln(args...)) }
func (b *ruleTB) Logf(format string, args ...any)   { b.t.Logf(format, args...) }
func (b *ruleTB) Name() string                      { return b.t.Name() }
func (b *ruleTB) Setenv(string, string)             { b.t.Fatal("plugintest: Setenv is not available under Check") }
func (b *ruleTB) Chdir(string)                      { b.t.Fatal("plugintest: Chdir is not available under Check") }
func (b *ruleTB) Skip(args ...any)                  { b.t.Skip(args...) }
func (b *ruleTB) SkipNow()                          { b.t.Skip("skipped") }
func (b *ruleTB) Skipf(format string, args ...any)  { b.t.Skip(fmt.Sprintf(format, args...)) }
func (b *ruleTB) Skipped() bool                     { b.t.mu.Lock(); defer b.t.mu.Unlock(); return b.t.skipped }
func (b *ruleTB) TempDir() string                   { return b.t.TempDir() }
func (b *ruleTB) Context() context.Context          { return b.t.Context() }
func (b *ruleTB) Output() io.Writer                 { return logWriter{b.t} }

// logWriter writes to a rule's log.
type logWriter struct{ t *ruleT }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}

// jsonContains reports whether got contains want: an object every member
// of want with a value containing want's, any other value equal.
func jsonContains(got, want json.RawMessage) bool {
	var g, w any
	dg := json.NewDecoder(bytes.NewReader(got))
	dg.UseNumber()
	dw := json.NewDecoder(bytes.NewReader(want))
	dw.UseNumber()
	if dg.Decode(&g) != nil || dw.Decode(&w) != nil {
		return false
	}
	return valueContains(g, w)
}

func valueContains(g, w any) bool {
	wm, ok := w.(map[string]any)
	if !ok {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		return bytes.Equal(gb, wb)
	}
	gm, ok := g.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !valueContains(gv, wv) {
			return false
		}
	}
	return true
}

// inspectLogLines is how much of the plugin's log Inspect's error keeps:
// the end, which says why it failed.
const inspectLogLines = 20

// logTail is the last n lines of log.
func logTail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Inspect starts the plugin as cfg says (its Config and Calls unused),
// asks it for its description and the schema of its config block, and
// stops it: what a caller needs to decode a config for Check the way a
// host decodes it. A plugin that did not start is a *StartError; any
// other failure ends with the last lines of the plugin's log.
func Inspect(ctx context.Context, cfg Config) (*Description, schema.Block, error) {
	root := &ruleT{r: &reporter{}, ctx: ctx, index: -1}
	var desc *Description
	var block schema.Block
	root.Run("Inspect", "The plugin starts and answers Describe and ConfigSchema.", func(t checkT) {
		p := start(t, cfg)
		desc = p.describe(t)
		block = p.configSchema(t)
	})
	if r := root.r.rules[0]; r.Result == Fail {
		if r.Err != nil {
			// It says why in the plugin's own words: the log adds
			// nothing.
			return nil, schema.Block{}, r.Err
		}
		msg := r.Detail
		if r.Log != "" {
			msg += "\n" + logTail(r.Log, inspectLogLines)
		}
		return nil, schema.Block{}, fmt.Errorf("%s", msg)
	}
	return desc, block, nil
}
