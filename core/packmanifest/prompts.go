package packmanifest

import "github.com/wophost/wophost/sdk/families/promptlibrary"

// checkPrompts validates the prompt lock map (PromptsKey): each key is a bare prompt
// name a node may ask for, each value a pin in the promptLibrary grammar
// (name@<version>, name@sha256:<hex> or name@<version>#sha256:<hex>).
// Checking at load means a bad lock entry refuses the pack instead of
// failing a node later.
func (m *Manifest) checkPrompts(ps *problems) {
	for _, k := range sortedKeys(m.Prompts) {
		field := "/" + PromptsKey + pointer(k)
		if !promptlibrary.IsBareName(k) {
			ps.add(field, "key must be a bare prompt name (lowercase segments joined by /)")
			continue
		}
		if _, err := promptlibrary.ParsePin(m.Prompts[k]); err != nil {
			ps.add(field, err.Error())
		}
	}
}
