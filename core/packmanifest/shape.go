package packmanifest

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// shape describes the JSON a manifest field must hold, the way OpenWOP
// v2's node-pack-manifest schema does, restated here so that each problem
// gets a message a pack author can act on. Only the rules of the published
// format live here; what this host makes of a valid value is validate.go's
// business.
type shape struct {
	// kind is "object", "array", "string", "boolean", "integer" or "any".
	kind string

	// Objects. props are the known keys; a key outside them is refused
	// unless values describes every value (a map), or hatch admits it.
	props map[string]*shape
	// required keys, each with the message shown when it is missing ("is
	// required" when empty).
	required map[string]string
	values   *shape
	// hatch admits, and ignores, keys matching vendorHatch.
	hatch bool
	// legacy maps a key of an older wophost spelling to what to write
	// instead.
	legacy map[string]string

	// Arrays.
	items              *shape
	minItems, maxItems int
	unique             bool

	// Strings: enum, pattern (with msg when it does not match) and length
	// bounds in characters, as JSON Schema counts them.
	enum           []string
	pattern        *regexp.Regexp
	msg            string
	minLen, maxLen int

	// Integers.
	minimum int64
	hasMin  bool
}

// vendorHatch matches the keys OpenWOP reserves for extensions: a consumer
// that does not know one ignores it and never refuses for it.
var vendorHatch = regexp.MustCompile(`^(openwop-|x-|vendor\.)`)

// hatchHint ends the message about an unknown key of an object that admits
// extensions.
const hatchHint = `; a host extension goes under a key starting with "x-", "openwop-" or "vendor."`

// check records in ps every way v, at field, breaks s.
func (s *shape) check(ps *problems, field string, v any) {
	switch s.kind {
	case "any":
	case "object":
		s.checkObject(ps, field, v)
	case "array":
		a, ok := v.([]any)
		if !ok {
			ps.add(field, "must be an array, not "+kindOf(v))
			return
		}
		switch {
		case len(a) < s.minItems:
			ps.add(field, "must have at least "+strconv.Itoa(s.minItems)+" "+plural(s.minItems, "item"))
		case s.maxItems > 0 && len(a) > s.maxItems:
			ps.add(field, "must have at most "+strconv.Itoa(s.maxItems)+" "+plural(s.maxItems, "item"))
		}
		for i, item := range a {
			f := field + pointer(strconv.Itoa(i))
			if s.unique {
				for j := range i {
					if sameValue(a[j], item) {
						ps.add(f, "repeats item "+strconv.Itoa(j))
					}
				}
			}
			if s.items != nil {
				s.items.check(ps, f, item)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			ps.add(field, "must be a string, not "+kindOf(v))
			return
		}
		n := utf8.RuneCountInString(str)
		switch {
		case len(s.enum) > 0 && !slices.Contains(s.enum, str):
			ps.add(field, "must be one of "+quoteList(s.enum))
		case n < s.minLen && n == 0:
			ps.add(field, "must not be empty")
		case n < s.minLen:
			ps.add(field, "must be at least "+strconv.Itoa(s.minLen)+" characters long")
		case s.maxLen > 0 && n > s.maxLen:
			ps.add(field, "must be at most "+strconv.Itoa(s.maxLen)+" characters long")
		case s.pattern != nil && !s.pattern.MatchString(str):
			msg := s.msg
			if msg == "" {
				msg = "must match " + s.pattern.String()
			}
			ps.add(field, msg)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			ps.add(field, "must be a boolean, not "+kindOf(v))
		}
	case "integer":
		n, ok := v.(json.Number)
		i, err := n.Int64()
		switch {
		case !ok || err != nil:
			ps.add(field, "must be an integer, not "+kindOf(v))
		case s.hasMin && i < s.minimum:
			ps.add(field, "must be at least "+strconv.FormatInt(s.minimum, 10))
		}
	}
}

func (s *shape) checkObject(ps *problems, field string, v any) {
	o, ok := v.(map[string]any)
	if !ok {
		ps.add(field, "must be an object, not "+kindOf(v))
		return
	}
	for _, k := range sortedKeys(s.required) {
		if _, ok := o[k]; !ok {
			msg := s.required[k]
			if msg == "" {
				msg = "is required"
			}
			ps.add(field+pointer(k), msg)
		}
	}
	for _, k := range sortedKeys(o) {
		f := field + pointer(k)
		if p, ok := s.props[k]; ok {
			p.check(ps, f, o[k])
			continue
		}
		if s.values != nil {
			s.values.check(ps, f, o[k])
			continue
		}
		if s.hatch && vendorHatch.MatchString(k) {
			continue
		}
		if msg, ok := s.legacy[k]; ok {
			ps.add(f, msg)
			continue
		}
		msg := "is not a known field (known: " + strings.Join(sortedKeys(s.props), ", ") + ")"
		if s.hatch {
			msg += hatchHint
		}
		ps.add(f, msg)
	}
}

// kindOf names the JSON type of v, with its article.
func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "an integer"
		}
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "another value"
}

// sameValue reports whether two decoded JSON values are equal, for
// uniqueItems.
func sameValue(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && string(ja) == string(jb)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// Constructors keep the manifest's description below readable.

func str() *shape                 { return &shape{kind: "string"} }
func nonEmpty() *shape            { return &shape{kind: "string", minLen: 1} }
func boolean() *shape             { return &shape{kind: "boolean"} }
func enum(vs ...string) *shape    { return &shape{kind: "string", enum: vs} }
func arrayOf(items *shape) *shape { return &shape{kind: "array", items: items} }
func mapOf(values *shape) *shape  { return &shape{kind: "object", values: values} }
func object(props map[string]*shape) *shape {
	return &shape{kind: "object", props: props}
}

func matching(re *regexp.Regexp, msg string) *shape {
	return &shape{kind: "string", pattern: re, msg: msg}
}

func (s *shape) requires(keys ...string) *shape {
	if s.required == nil {
		s.required = map[string]string{}
	}
	for _, k := range keys {
		s.required[k] = ""
	}
	return s
}

func (s *shape) uniq() *shape { s.unique = true; return s }

// OpenWOP v2 grammars, restated from its schemas.
var (
	// namePattern is a scope (core, vendor, community or private) then at
	// least two more segments: "community.acme.demo".
	namePattern   = regexp.MustCompile(`^(core|vendor|community|private)\.[a-z][a-z0-9_-]*(\.[a-z][a-zA-Z0-9_-]*)+$`)
	typeIDPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-zA-Z0-9_-]*)+$`)
	// enginesPattern is OpenWOP's range: a ">=" lower bound and a
	// "<N.0.0" ceiling, which may be left out (read as "<2.0.0").
	enginesPattern = regexp.MustCompile(`^>=(\d+)(\.\d+){0,2}(?: <(\d+)\.0\.0)?$`)
	// sha256Pattern is a lowercase hex SHA-256 digest.
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// facetPattern is a facet name, in peerDependenciesMeta and in
	// x-wophost-requires.
	facetPattern       = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)
	semverPattern      = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][a-zA-Z0-9-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][a-zA-Z0-9-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	keyIDPattern       = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)
	modelCapPattern    = regexp.MustCompile(`^([a-z][a-z0-9-]*|x-host-[a-z][a-z0-9-]*-[a-z][a-z0-9-]*)$`)
	providerPattern    = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	connectorIDPattern = regexp.MustCompile(`^[a-z][a-z0-9.-]*$`)
)

// Messages for the wophost spellings that OpenWOP v2 does not admit.
const (
	inlineInputMsg  = `inline schemas are not part of OpenWOP v2 manifests: put the schema in a file inside the pack and name it in inputSchemaRef`
	inlineOutputMsg = `inline schemas are not part of OpenWOP v2 manifests: put the schema in a file inside the pack and name it in outputSchemaRef`
	nodeRequiresMsg = `"requires" is not part of OpenWOP v2 node entries: write the same list as "` + RequiresKey + `"`
	rootPromptsMsg  = `the prompt lock map is not part of OpenWOP v2 manifests: write the same map as "` + PromptsKey + `"`
	schemaKeyMsg    = `"$schema" is not part of OpenWOP v2 manifests, whose root admits no other keys: remove it`
)

// manifestShape is pack.json as OpenWOP v2 publishes it, plus this host's
// two hatch keys. It is built once and never changed.
var manifestShape = newManifestShape()

func newManifestShape() *shape {
	semver := matching(semverPattern, `must be a semantic version, e.g. "1.2.0"`)
	typeID := &shape{kind: "string", pattern: typeIDPattern, maxLen: MaxTypeIDBytes,
		msg: `must be a dotted type name of lowercase-led segments, e.g. "acme.summarize"`}
	path := nonEmpty()
	strList := arrayOf(str())

	oauth := object(map[string]*shape{
		"type": enum("oauth2"), "provider": nonEmpty(), "scopes": strList,
	}).requires("type", "provider")

	node := object(map[string]*shape{
		"typeId":              typeID,
		"version":             semver,
		"label":               nonEmpty(),
		"description":         str(),
		"category":            enum("chat", "control", "data", "canvas", "coordination", "integration"),
		"role":                nonEmpty(),
		"capabilities":        arrayOf(enum("streamable", "cacheable", "side-effectful", "mcp-exportable")).uniq(),
		"configSchemaRef":     path,
		"inputSchemaRef":      path,
		"outputSchemaRef":     path,
		"outputs":             mapOf(object(map[string]*shape{"sensitive": boolean()})),
		"envelopeContractRef": path,
		"artifact": object(map[string]*shape{
			"typeId": typeID, "syncOn": enum("completion", "approval", "manual"), "supportsCheckpoint": boolean(),
		}),
		"mcp": object(map[string]*shape{"exposeAsTool": boolean(), "toolName": str()}),
		"requiresSecrets": arrayOf(object(map[string]*shape{
			"id": nonEmpty(), "kind": enum("ai-provider", "api-key", "oauth-token", "custom"),
			"provider": str(), "scope": enum("tenant", "user", "run"),
		}).requires("id", "kind")),
		"requiredCredentials": arrayOf(object(map[string]*shape{
			"key": nonEmpty(), "scope": enum("user", "workspace", "tenant"), "displayName": str(),
		}).requires("key")),
		"auth": oauth,
		"requiredModelCapabilities": &shape{kind: "array", unique: true, maxItems: 32,
			items: matching(modelCapPattern, `must be a model capability name, e.g. "structured-output"`)},
		"fallbackModel": object(map[string]*shape{
			"provider": matching(providerPattern, `must be a provider id, e.g. "anthropic"`), "model": nonEmpty(),
		}).requires("provider", "model"),
		RequiresKey: arrayOf(str()),
	}).requires("typeId", "version", "category", "role")
	node.hatch = true
	node.legacy = map[string]string{"inputSchema": inlineInputMsg, "outputSchema": inlineOutputMsg, "requires": nodeRequiresMsg}

	connectorAuth := object(map[string]*shape{
		// Either OpenWOP's OAuth2 block or a stored-credential reference;
		// validate.go checks the variant's own keys.
		"type": enum("oauth2", "credential"), "provider": nonEmpty(), "scopes": strList,
		"key": nonEmpty(), "scope": enum("user", "workspace", "tenant"),
	}).requires("type")
	positive := &shape{kind: "integer", minimum: 1, hasMin: true}
	connector := object(map[string]*shape{
		"id":          matching(connectorIDPattern, `must be a lowercase connector id, e.g. "salesforce"`),
		"displayName": nonEmpty(),
		"auth":        connectorAuth,
		"actions": arrayOf(object(map[string]*shape{
			"typeId": typeID, "displayName": nonEmpty(), "idempotent": boolean(),
			"rateLimit": object(map[string]*shape{"requests": positive, "perSeconds": positive}),
			"paginated": boolean(),
		}).requires("typeId", "displayName")),
		"triggers": arrayOf(nonEmpty()),
	}).requires("id", "displayName")

	runtime := object(map[string]*shape{
		"language":          enum("javascript", "python", "go", "wasm", "wasm-component", "remote"),
		"entry":             str(),
		"format":            enum("esm", "cjs", "wheel", "binary", "shared-library", "wasm", "wasm-component"),
		"minRuntimeVersion": str(),
		"requires":          arrayOf(enum(RuntimeRequirements()...)).uniq(),
		// The MCP Registry server record of a remote pack; this host
		// refuses remote packs, so only its being an object is checked.
		"mcpServer": {kind: "object", values: &shape{kind: "any"}},
	}).requires("language", "entry")

	root := object(map[string]*shape{
		"name":        &shape{kind: "string", pattern: namePattern, maxLen: 256, msg: `must be a scope (core, vendor, community or private) and at least two lowercase-led segments, e.g. "community.acme.demo"`},
		"version":     semver,
		"kind":        str(),
		"description": &shape{kind: "string", maxLen: 1024},
		"author":      str(),
		"license":     str(),
		"homepage":    str(),
		"repository":  str(),
		"keywords":    &shape{kind: "array", maxItems: 50, items: &shape{kind: "string", maxLen: 64}},
		"engines": object(map[string]*shape{
			"openwop": matching(enginesPattern, `must be a ">=" lower bound and a major ceiling, e.g. ">=2.0 <3.0.0"`),
		}).requires("openwop"),
		"dependencies":     mapOf(str()),
		"peerDependencies": mapOf(str()),
		"peerDependenciesMeta": mapOf(object(map[string]*shape{
			"optional": boolean(),
			"facets": &shape{kind: "array", minItems: 1, unique: true,
				items: matching(facetPattern, `must be a facet name, e.g. "await"`)},
		})),
		"nodes":   arrayOf(node),
		"agents":  arrayOf(&shape{kind: "any"}),
		"runtime": runtime,
		"signing": object(map[string]*shape{
			"keyId":  matching(keyIDPattern, "must be a signing key id of 1 to 128 letters, digits and ._~-"),
			"scheme": enum("ed25519-canonical-json"),
		}).requires("keyId", "scheme"),
		"connector":    connector,
		PromptsKey:     mapOf(str()),
		EntrySHA256Key: matching(sha256Pattern, "must be the entry binary's SHA-256 digest, 64 lowercase hexadecimal characters"),
		FilesKey:       mapOf(matching(sha256Pattern, "must be the file's SHA-256 digest, 64 lowercase hexadecimal characters")),
	})
	root.required = map[string]string{
		"name": "", "version": "", "kind": `is required: write "kind": "node"`, "runtime": "",
		"engines": `is required: write "engines": {"openwop": ">=2.0 <3.0.0"}`,
	}
	root.hatch = true
	root.legacy = map[string]string{"prompts": rootPromptsMsg, "$schema": schemaKeyMsg}
	return root
}
