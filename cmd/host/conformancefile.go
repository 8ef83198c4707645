package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/sdk/plugintest"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// A conformance file says how `host conformance` runs the kit against a
// plugin: how to start it (plugin), its config block as the host's config
// would hold it (config), the sample calls (call) and what the core
// families' contract checks need (family). It is HCL, or HCL's JSON form
// when its name ends in .json; docs/conformance.md describes it.

// rawConformance is the file's syntax, for gohcl.
type rawConformance struct {
	Plugin   *rawConformancePlugin `hcl:"plugin,block"`
	Config   *rawBlock             `hcl:"config,block"`
	Calls    []*rawCall            `hcl:"call,block"`
	Families []*rawFamily          `hcl:"family,block"`
}

type rawConformancePlugin struct {
	Executable   *hcl.Attribute `hcl:"executable"`
	Args         *hcl.Attribute `hcl:"args"`
	Env          *hcl.Attribute `hcl:"env"`
	StartTimeout *hcl.Attribute `hcl:"start_timeout"`
	DefRange     hcl.Range      `hcl:",def_range"`
}

// rawBlock is a block decoded later, against the plugin's config schema.
type rawBlock struct {
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawCall struct {
	Name       string         `hcl:"name,label"`
	Input      *hcl.Attribute `hcl:"input"`
	Expect     *hcl.Attribute `hcl:"expect"`
	ExpectCode *hcl.Attribute `hcl:"expect_code"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type rawFamily struct {
	Name     string    `hcl:"name,label"`
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawAIEnvelope struct {
	Config      *rawBlock      `hcl:"config,block"`
	AsyncConfig *rawBlock      `hcl:"async_config,block"`
	UserMessage *hcl.Attribute `hcl:"user_message"`
	JSONSchema  *hcl.Attribute `hcl:"json_schema"`
}

type rawPromptLibrary struct {
	Config  *rawBlock    `hcl:"config,block"`
	Prompts []*rawPrompt `hcl:"prompt,block"`
}

type rawPrompt struct {
	Name    string `hcl:"name"`
	Version string `hcl:"version"`
	Raw     string `hcl:"raw"`
}

type rawMCP struct {
	Config        *rawBlock      `hcl:"config,block"`
	ServerID      string         `hcl:"server_id"`
	Tool          string         `hcl:"tool"`
	ToolArguments *hcl.Attribute `hcl:"tool_arguments"`
	ResourceURI   *string        `hcl:"resource_uri"`
	UnknownTool   *string        `hcl:"unknown_tool"`
}

type rawAgentRuntime struct {
	Config          *rawBlock `hcl:"config,block"`
	MailboxCapacity *int      `hcl:"mailbox_capacity"`
}

// conformanceFile is a parsed conformance file. The config blocks stay
// HCL bodies until the plugin's schema is known (resolve).
type conformanceFile struct {
	files map[string]*hcl.File
	// dir is the file's absolute directory.
	dir  string
	ectx *hcl.EvalContext
	// executable (absolute, "" when not given), args, env and
	// startTimeout are the plugin block's.
	executable   string
	args         []string
	env          []string
	startTimeout time.Duration
	config       *rawBlock
	calls        []plugintest.Call
	ai           *rawAIEnvelope
	aiSchema     json.RawMessage
	aiMessage    string
	prompts      *rawPromptLibrary
	mcp          []*rawMCP
	mcpArgs      []json.RawMessage
	agents       *rawAgentRuntime
	// pluginRange is the plugin block's place, nil without one.
	pluginRange *hcl.Range
}

// conformanceFamilies are the families a family block may name.
func conformanceFamilies() []string {
	return []string{wop.FamilyAIEnvelope, wop.FamilyPromptLibrary, wop.FamilyMCP, wop.FamilyAgentRuntime}
}

// loadConformanceFile parses the conformance file at path. Every problem
// is a diagnostic with its place in the file.
func loadConformanceFile(path string) (*conformanceFile, hcl.Diagnostics) {
	parser := hclparse.NewParser()
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		file, diags = parser.ParseJSONFile(path)
	} else {
		file, diags = parser.ParseHCLFile(path)
	}
	cf := &conformanceFile{files: parser.Files()}
	if diags.HasErrors() {
		return cf, diags
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return cf, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid conformance file path", Detail: err.Error()})
	}
	cf.dir = dir
	cf.ectx = conformanceEvalContext(dir)
	var raw rawConformance
	diags = append(diags, gohcl.DecodeBody(file.Body, cf.ectx, &raw)...)
	if diags.HasErrors() {
		return cf, diags
	}
	cf.config = raw.Config
	if p := raw.Plugin; p != nil {
		diags = append(diags, cf.decodePlugin(p)...)
	}
	for _, c := range raw.Calls {
		call, ds := decodeCall(c, cf.ectx)
		diags = append(diags, ds...)
		cf.calls = append(cf.calls, call)
	}
	seen := map[string]hcl.Range{}
	for _, f := range raw.Families {
		if prev, ok := seen[f.Name]; ok && f.Name != wop.FamilyMCP {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate family block",
				Detail:  fmt.Sprintf("Family %q is already configured at %s; only mcp may have several blocks, one per server.", f.Name, prev),
				Subject: f.DefRange.Ptr()})
			continue
		}
		seen[f.Name] = f.DefRange
		diags = append(diags, cf.decodeFamily(f)...)
	}
	return cf, diags
}

// conformanceEvalContext is the host config's (env and file, relative to
// dir), with jsonencode, format and join for inputs, and abspath, which makes a path relative to dir
// absolute: a plugin runs in its own directory, with a state directory
// of its own for each process.
func conformanceEvalContext(dir string) *hcl.EvalContext {
	ectx := (&config.Loader{}).EvalContext(dir)
	ectx.Functions["jsonencode"] = stdlib.JSONEncodeFunc
	ectx.Functions["format"] = stdlib.FormatFunc
	ectx.Functions["join"] = stdlib.JoinFunc
	ectx.Functions["abspath"] = function.New(&function.Spec{
		Description: "Returns the absolute path of a path relative to the conformance file's directory.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			return cty.StringVal(filepath.Clean(p)), nil
		},
	})
	return ectx
}

func (cf *conformanceFile) decodePlugin(p *rawConformancePlugin) hcl.Diagnostics {
	var diags hcl.Diagnostics
	cf.pluginRange = p.DefRange.Ptr()
	if p.Executable != nil {
		diags = append(diags, gohcl.DecodeExpression(p.Executable.Expr, cf.ectx, &cf.executable)...)
		if cf.executable != "" && !filepath.IsAbs(cf.executable) {
			cf.executable = filepath.Join(cf.dir, cf.executable)
		}
	}
	if p.Args != nil {
		diags = append(diags, gohcl.DecodeExpression(p.Args.Expr, cf.ectx, &cf.args)...)
	}
	if p.Env != nil {
		var env map[string]string
		diags = append(diags, gohcl.DecodeExpression(p.Env.Expr, cf.ectx, &env)...)
		for k, v := range env {
			cf.env = append(cf.env, k+"="+v)
		}
	}
	if p.StartTimeout != nil {
		var s string
		ds := gohcl.DecodeExpression(p.StartTimeout.Expr, cf.ectx, &s)
		diags = append(diags, ds...)
		if !ds.HasErrors() {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid start_timeout",
					Detail: fmt.Sprintf("start_timeout must be a positive duration such as \"15s\"; got %q.", s), Subject: p.StartTimeout.Expr.Range().Ptr()})
			}
			cf.startTimeout = d
		}
	}
	return diags
}

// decodeCall decodes one call block: its label is family.method, the
// method after the last dot.
func decodeCall(c *rawCall, ectx *hcl.EvalContext) (plugintest.Call, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	i := strings.LastIndex(c.Name, ".")
	if i <= 0 || i == len(c.Name)-1 {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid call label",
			Detail:  fmt.Sprintf("A call block's label is \"family.method\", such as \"acme.kv.get\"; got %q.", c.Name),
			Subject: c.DefRange.Ptr()})
		return plugintest.Call{}, diags
	}
	call := plugintest.Call{Family: c.Name[:i], Method: c.Name[i+1:]}
	var ds hcl.Diagnostics
	call.Payload, ds = jsonValue(c.Input, ectx)
	diags = append(diags, ds...)
	call.WantResult, ds = jsonValue(c.Expect, ectx)
	diags = append(diags, ds...)
	if c.ExpectCode != nil {
		diags = append(diags, gohcl.DecodeExpression(c.ExpectCode.Expr, ectx, &call.WantCode)...)
	}
	if c.Expect != nil && call.WantCode != "" {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Conflicting expectations",
			Detail: "A call either succeeds with a result (expect) or fails with a code (expect_code), not both.", Subject: c.DefRange.Ptr()})
	}
	return call, diags
}

// jsonValue evaluates attr as JSON: a string is JSON text (as
// jsonencode or a heredoc gives it), any other value is encoded. A nil
// attr is nil.
func jsonValue(attr *hcl.Attribute, ectx *hcl.EvalContext) (json.RawMessage, hcl.Diagnostics) {
	if attr == nil {
		return nil, nil
	}
	v, diags := attr.Expr.Value(ectx)
	if diags.HasErrors() {
		return nil, diags
	}
	bad := func(detail string) hcl.Diagnostics {
		return append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + attr.Name, Detail: detail, Subject: attr.Expr.Range().Ptr()})
	}
	if !v.IsWhollyKnown() || v.IsNull() {
		return nil, bad(attr.Name + " must be a known value.")
	}
	if v.Type() == cty.String {
		s := v.AsString()
		if !json.Valid([]byte(s)) {
			return nil, bad(fmt.Sprintf("A string %s is JSON text, as jsonencode gives it, and %q is not valid JSON; write an object, or jsonencode(...).", attr.Name, s))
		}
		return json.RawMessage(s), diags
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, bad(fmt.Sprintf("Cannot encode %s as JSON: %v.", attr.Name, err))
	}
	return b, diags
}

// decodeFamily decodes a family block by its label.
func (cf *conformanceFile) decodeFamily(f *rawFamily) hcl.Diagnostics {
	var diags hcl.Diagnostics
	switch f.Name {
	case wop.FamilyAIEnvelope:
		var raw rawAIEnvelope
		diags = gohcl.DecodeBody(f.Body, cf.ectx, &raw)
		var ds hcl.Diagnostics
		cf.aiSchema, ds = jsonValue(raw.JSONSchema, cf.ectx)
		diags = append(diags, ds...)
		if raw.UserMessage != nil {
			diags = append(diags, gohcl.DecodeExpression(raw.UserMessage.Expr, cf.ectx, &cf.aiMessage)...)
		}
		cf.ai = &raw
	case wop.FamilyPromptLibrary:
		var raw rawPromptLibrary
		diags = gohcl.DecodeBody(f.Body, cf.ectx, &raw)
		if len(raw.Prompts) == 0 && !diags.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No prompt",
				Detail: "A promptLibrary block lists the prompts the plugin serves under its config, one prompt block each (name, version, raw).", Subject: f.DefRange.Ptr()})
		}
		cf.prompts = &raw
	case wop.FamilyMCP:
		var raw rawMCP
		diags = gohcl.DecodeBody(f.Body, cf.ectx, &raw)
		args, ds := jsonValue(raw.ToolArguments, cf.ectx)
		diags = append(diags, ds...)
		cf.mcp = append(cf.mcp, &raw)
		cf.mcpArgs = append(cf.mcpArgs, args)
	case wop.FamilyAgentRuntime:
		var raw rawAgentRuntime
		diags = gohcl.DecodeBody(f.Body, cf.ectx, &raw)
		cf.agents = &raw
	default:
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown family",
			Detail:  fmt.Sprintf("A family block configures the contract checks of a core family: %s; got %q.", strings.Join(conformanceFamilies(), ", "), f.Name),
			Subject: f.DefRange.Ptr()})
	}
	return diags
}

// resolve decodes the file's config blocks against the plugin's schema,
// as the host decodes a capability's config block, and returns the kit's
// suite for the plugin exe started with args. pluginConfig, when not
// nil, replaces the config block.
func (cf *conformanceFile) resolve(exe string, args []string, s schema.Block, pluginConfig json.RawMessage) (plugintest.Suite, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	decode := func(b *rawBlock, fallback json.RawMessage) json.RawMessage {
		if b == nil {
			return fallback
		}
		out, ds := config.DecodePluginConfig(&config.Capability{Name: "conformance", Plugin: exe, Config: b.Body, ConfigRange: b.DefRange}, s, cf.ectx)
		diags = append(diags, ds...)
		return out
	}
	base := pluginConfig
	if base == nil {
		base = decode(cf.config, json.RawMessage(`{}`))
	}
	suite := plugintest.Suite{Config: plugintest.Config{
		Binary: exe, Args: args, Config: base, Calls: cf.calls, Env: cf.env, StartTimeout: cf.startTimeout,
	}}
	if a := cf.ai; a != nil {
		suite.AIEnvelope = &plugintest.AIEnvelopeConfig{Config: decode(a.Config, nil), AsyncConfig: decode(a.AsyncConfig, nil),
			UserMessage: cf.aiMessage, JSONSchema: cf.aiSchema}
	}
	if p := cf.prompts; p != nil {
		cfg := &plugintest.PromptLibraryConfig{Config: decode(p.Config, nil)}
		for _, sp := range p.Prompts {
			cfg.Prompts = append(cfg.Prompts, plugintest.StoredPrompt{Name: sp.Name, Version: sp.Version, Raw: sp.Raw})
		}
		suite.PromptLibrary = cfg
	}
	for i, m := range cf.mcp {
		cfg := plugintest.MCPConfig{Config: decode(m.Config, nil), ServerID: m.ServerID, Tool: m.Tool, ToolArguments: cf.mcpArgs[i]}
		if m.ResourceURI != nil {
			cfg.ResourceURI = *m.ResourceURI
		}
		if m.UnknownTool != nil {
			cfg.UnknownTool = *m.UnknownTool
		}
		suite.MCP = append(suite.MCP, cfg)
	}
	if a := cf.agents; a != nil {
		cfg := &plugintest.AgentRuntimeConfig{Config: decode(a.Config, nil)}
		if a.MailboxCapacity != nil {
			cfg.MailboxCapacity = *a.MailboxCapacity
		}
		suite.AgentRuntime = cfg
	}
	return suite, diags
}

// needsSchema reports whether resolve needs the plugin's schema: a config
// block is to be decoded.
func (cf *conformanceFile) needsSchema(pluginConfig json.RawMessage) bool {
	blocks := []*rawBlock{}
	if pluginConfig == nil {
		blocks = append(blocks, cf.config)
	}
	if cf.ai != nil {
		blocks = append(blocks, cf.ai.Config, cf.ai.AsyncConfig)
	}
	if cf.prompts != nil {
		blocks = append(blocks, cf.prompts.Config)
	}
	for _, m := range cf.mcp {
		blocks = append(blocks, m.Config)
	}
	if cf.agents != nil {
		blocks = append(blocks, cf.agents.Config)
	}
	for _, b := range blocks {
		if b != nil {
			return true
		}
	}
	return false
}

// readable reports whether path names a file, for the arguments made
// absolute.
func readable(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
