package agentruntime

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ParsePackAgents parses and validates the agents[] list of one pack.json
// as a host does at install: each manifest on its own (ParseManifest),
// then across the list: ids are unique, and every handoff target names an
// agent of the same list or one of known (ids already in the host's
// registry; nil for none). Problems carry pointers from the pack.json root
// ("/agents/2/toolAllowlist/0"). Checking that prompt pins resolve and that
// the MCP servers of each allowlist exist is left to the host, which knows
// its promptLibrary and mcp configuration (see Manifest.MCPServers and
// ParsePromptPin).
func ParsePackAgents(agents []json.RawMessage, known func(id string) bool) ([]*Manifest, error) {
	var ps problems
	out := make([]*Manifest, len(agents))
	index := map[string]int{}
	for i, raw := range agents {
		prefix := fmt.Sprintf("/agents/%d", i)
		m, err := ParseManifest(raw)
		if err != nil {
			var me *ManifestError
			if errors.As(err, &me) {
				for _, p := range me.Problems {
					ps = append(ps, &FieldError{Pointer: prefix + p.Pointer, Message: p.Message})
				}
				continue
			}
			ps.add(prefix, "%v", err)
			continue
		}
		if j, dup := index[m.ID]; dup {
			ps.add(prefix+"/id", "repeats the id %q of /agents/%d", m.ID, j)
		} else {
			index[m.ID] = i
		}
		out[i] = m
	}
	for i, m := range out {
		if m == nil || m.Handoff == nil {
			continue
		}
		for j, target := range m.Handoff.Targets {
			if _, ok := index[target]; ok || (known != nil && known(target)) {
				continue
			}
			ps.add(fmt.Sprintf("/agents/%d/handoff/targets/%d", i, j), "no agent %q in this pack or the registry", target)
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return out, nil
}
