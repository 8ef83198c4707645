package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/wophost/wophost/core/packmanifest"
)

// MaxSchemaBytes bounds a node schema file PackDetail reads: a schema is
// a few kilobytes; a larger file is named, not read.
const MaxSchemaBytes = 256 << 10

// PackDetail is what the operator console shows of one pack beyond
// PackInfo: its manifest's description, signing and nodes with their
// schemas.
type PackDetail struct {
	PackInfo
	Description string `json:"description,omitempty"`
	License     string `json:"license,omitempty"`
	// SigningKeyID is the key id pack.json's signing names, if any;
	// PackInfo.SignedBy says whether the signature verified, and with
	// which trusted key.
	SigningKeyID     string            `json:"signingKeyId,omitempty"`
	PeerDependencies map[string]string `json:"peerDependencies,omitempty"`
	Nodes            []NodeDetail      `json:"nodeDetails,omitempty"`
}

// NodeDetail is one node of a pack's manifest with its schemas.
type NodeDetail struct {
	TypeID       string   `json:"typeId"`
	Version      string   `json:"version"`
	Label        string   `json:"label,omitempty"`
	Description  string   `json:"description,omitempty"`
	Role         string   `json:"role,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	// Input, Output and Config are the schemas the manifest's refs name,
	// read from the pack directory; a schema that cannot be read is
	// absent and its SchemaErrors entry says why.
	Input        json.RawMessage   `json:"input,omitempty"`
	Output       json.RawMessage   `json:"output,omitempty"`
	Config       json.RawMessage   `json:"config,omitempty"`
	SchemaErrors map[string]string `json:"schemaErrors,omitempty"`
}

// PackDetail returns the detail of the pack named name, or false when
// the host declares no such pack. A pack whose manifest was never read
// (refused before it) has its PackInfo alone.
func (h *Host) PackDetail(name string) (PackDetail, bool) {
	var d PackDetail
	found := false
	for _, info := range h.Packs() {
		if info.Name == name {
			d.PackInfo, found = info, true
			break
		}
	}
	if !found {
		return d, false
	}
	h.mu.RLock()
	var m *packmanifest.Manifest
	var dir string
	for _, p := range h.packs {
		if p.Name == name {
			m, dir = p.manifest, p.Path
			break
		}
	}
	h.mu.RUnlock()
	if m == nil {
		return d, true
	}
	d.Description, d.License, d.PeerDependencies = m.Description, m.License, m.PeerDependencies
	if m.Signing != nil {
		d.SigningKeyID = m.Signing.KeyID
	}
	for _, n := range m.Nodes {
		nd := NodeDetail{TypeID: n.TypeID, Version: n.Version, Label: n.Label, Description: n.Description, Role: n.Role, Capabilities: n.Capabilities}
		for _, s := range []struct {
			kind, ref string
			into      *json.RawMessage
		}{{"input", n.InputSchemaRef, &nd.Input}, {"output", n.OutputSchemaRef, &nd.Output}, {"config", n.ConfigSchemaRef, &nd.Config}} {
			if s.ref == "" {
				continue
			}
			b, err := readPackSchema(dir, s.ref)
			if err != nil {
				if nd.SchemaErrors == nil {
					nd.SchemaErrors = map[string]string{}
				}
				nd.SchemaErrors[s.kind] = err.Error()
				continue
			}
			*s.into = b
		}
		d.Nodes = append(d.Nodes, nd)
	}
	return d, true
}

// readPackSchema reads the schema ref names inside the pack directory
// dir: a relative path that stays inside it (os.Root refuses one that
// leaves it, links included), at most MaxSchemaBytes of JSON. A ref with
// a fragment is read whole; a URL is not fetched.
func readPackSchema(dir, ref string) (json.RawMessage, error) {
	file, _, _ := strings.Cut(ref, "#")
	if strings.Contains(file, "://") {
		return nil, fmt.Errorf("%s is a URL, which the host does not fetch", ref)
	}
	file = path.Clean(strings.TrimPrefix(file, "./"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open pack directory: %w", err)
	}
	defer root.Close()
	f, err := root.Open(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file in the pack", ref)
		}
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSchemaBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if len(b) > MaxSchemaBytes {
		return nil, fmt.Errorf("%s is over %d bytes", ref, MaxSchemaBytes)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s is not JSON", ref)
	}
	return b, nil
}
