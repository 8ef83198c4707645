package packmanifest

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/wophost/wophost/sdk/wop"
)

// notes lists the OpenWOP features of a valid manifest that this host
// reads without acting on, each with what that means. The authoring
// metadata (author, license, homepage, repository, keywords) is fine as
// it is and gets none.
func (m *Manifest) notes() []Note {
	var out []Note
	add := func(field, msg string) { out = append(out, Note{Field: field, Message: msg}) }
	if len(m.Connector) > 0 {
		add("/connector", "the connector block is not acted on: its actions run as the pack's ordinary nodes")
	}
	// A WebAssembly pack's format is checked: it can only be "wasm".
	if m.Runtime.Format != "" && !m.IsWasm() {
		add("/runtime/format", "is not read: the host starts runtime.entry as an executable whatever its format")
	}
	if m.Runtime.MinRuntimeVersion != "" {
		add("/runtime/minRuntimeVersion", "is not checked: the host starts runtime.entry as an executable")
	}
	for _, key := range sortedKeys(m.PeerDependencies) {
		switch v := m.PeerDependencies[key]; v {
		case Required, Optional, "supported":
		default:
			add("/peerDependencies"+pointer(key), "the version range "+strconv.Quote(v)+" is not checked: the family is required as a whole")
		}
	}
	for i, n := range m.Nodes {
		field := "/nodes" + pointer(strconv.Itoa(i))
		if n.Label != "" {
			add(field+"/label", "is not shown: the host names nodes by typeId")
		}
		if len(n.Capabilities) > 0 {
			add(field+"/capabilities", "the traits ("+strings.Join(n.Capabilities, ", ")+") are not acted on: nothing is cached, streamed or exported to MCP because of them")
		}
		for _, port := range sortedKeys(n.Outputs) {
			if n.Outputs[port].Sensitive {
				add(field+"/outputs"+pointer(port)+"/sensitive", "is not honoured: the output is returned and written to run records unmasked")
			}
		}
		if n.EnvelopeContractRef != "" {
			add(field+"/envelopeContractRef", "is not read: the envelope contract is not checked")
		}
		if len(n.Artifact) > 0 {
			add(field+"/artifact", "is not acted on: the host keeps no artifacts")
		}
		if len(n.MCP) > 0 {
			add(field+"/mcp", "is not acted on: the host does not expose nodes as MCP tools")
		}
		if n.ConfigSchemaRef != "" {
			add(field+"/configSchemaRef", "the schema is checked at load, but this host passes nodes no config to check against it")
		}
		if len(n.RequiresSecrets) > 0 || len(n.RequiredCredentials) > 0 {
			add(field, "needs secrets or credentials, which this host does not resolve: each dispatch of "+n.TypeID+" is refused with "+CodeCredentialUnavailable)
		}
		if len(n.RequiredModelCapabilities) > 0 {
			add(field+"/requiredModelCapabilities", "this host advertises no model capabilities and never substitutes a fallbackModel: each dispatch of "+n.TypeID+" is refused with "+wop.CodeCapabilityNotProvided)
		}
	}
	return out
}

// DispatchRefusal is the error refusing every dispatch of the node before
// any pack code runs, or nil: a node that needs secrets or credentials
// gets credential_unavailable, since this host advertises neither family;
// one that needs model capabilities gets capability_not_provided, since it
// advertises none and substitutes no fallbackModel.
func (n *Node) DispatchRefusal() error {
	if len(n.RequiresSecrets) > 0 || len(n.RequiredCredentials) > 0 {
		var keys []string
		for _, raw := range n.RequiresSecrets {
			keys = append(keys, requirementName(raw, "id"))
		}
		for _, raw := range n.RequiredCredentials {
			keys = append(keys, requirementName(raw, "key"))
		}
		return wop.Errorf(CodeCredentialUnavailable, "node %s needs secrets or credentials (%s), and this host resolves none", n.TypeID, strings.Join(keys, ", ")).
			WithDetails(map[string]any{"typeId": n.TypeID, "credentials": keys})
	}
	if len(n.RequiredModelCapabilities) > 0 {
		return wop.Errorf(wop.CodeCapabilityNotProvided, "node %s needs model capabilities (%s), and this host advertises none", n.TypeID, strings.Join(n.RequiredModelCapabilities, ", ")).
			WithDetails(map[string]any{"typeId": n.TypeID, "modelCapabilities": n.RequiredModelCapabilities})
	}
	return nil
}

// requirementName reads the identifying key of a secret or credential
// requirement.
func requirementName(raw json.RawMessage, key string) string {
	var v map[string]any
	if json.Unmarshal(raw, &v) == nil {
		if s, ok := v[key].(string); ok {
			return s
		}
	}
	return "?"
}
