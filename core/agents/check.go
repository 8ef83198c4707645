package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
)

// Problem is one reason an agent manifest is refused: the JSON pointer of
// the offending value (from the pack.json root at install, from the spawn
// request for an inline manifest) and why. It has the shape of the
// problems a refused pack.json lists.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Problems collects the problems of one check.
type Problems []Problem

// Add records a problem.
func (ps *Problems) Add(field, message string) {
	*ps = append(*ps, Problem{Field: field, Message: message})
}

// Err returns nil without problems, else a pack_validation_failed
// *wop.Error listing them under details.problems.
func (ps Problems) Err() error {
	return ps.err(wop.CodePackValidationFailed, "agent manifests")
}

func (ps Problems) err(code, what string) error {
	if len(ps) == 0 {
		return nil
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Field + ": " + p.Message
	}
	return wop.Errorf(code, "%s: %s", what, strings.Join(parts, "; ")).
		WithDetails(map[string]any{"problems": []Problem(ps)})
}

// Checker resolves what agent manifests name against the host, the checks
// of an install.
type Checker struct {
	// ResolvePrompt fetches a pinned prompt reference through the host's
	// promptLibrary and returns what it resolved to.
	ResolvePrompt func(ctx context.Context, ref string) (ResolvedPrompt, error)
	// MCPServers returns the server ids the advertised mcp.client facet
	// lists; ok is false when mcp.client is not advertised.
	MCPServers func() (servers []string, ok bool)
}

// CheckPack parses and validates the agents[] of pack and resolves what
// each names: the systemPromptRef must resolve through promptLibrary, and
// every MCP server of the toolAllowlist must be one the mcp plugin serves.
// Handoff targets outside the pack are checked by Registry.Install. Every
// problem is reported at once, as a pack_validation_failed *wop.Error.
func (c *Checker) CheckPack(ctx context.Context, pack string, raw []json.RawMessage) ([]*Entry, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	ms, err := agentruntime.ParsePackAgents(raw, func(string) bool { return true })
	if err != nil {
		return nil, fromManifestError(err, "", wop.CodePackValidationFailed, "agent manifests")
	}
	var ps Problems
	entries := make([]*Entry, 0, len(ms))
	for i, m := range ms {
		prefix := fmt.Sprintf("/agents/%d", i)
		prompt := c.check(ctx, &ps, prefix, m)
		if len(ps) > 0 {
			continue
		}
		e, err := NewEntry(pack, i, m, prompt)
		if err != nil {
			ps.Add(prefix, err.Error())
			continue
		}
		entries = append(entries, e)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return entries, nil
}

// CheckInline parses an inline manifest from a spawn request and gives it
// the checks of an install. known reports installed agent ids, which its
// handoff targets must name. Problems are a validation_error whose
// pointers start with /manifest.
func (c *Checker) CheckInline(ctx context.Context, raw json.RawMessage, known func(string) bool) (*Entry, error) {
	m, err := agentruntime.ParseManifest(raw)
	if err != nil {
		return nil, fromManifestError(err, "/manifest", wop.CodeValidation, agentruntime.MethodSpawn)
	}
	var ps Problems
	prompt := c.check(ctx, &ps, "/manifest", m)
	if m.Handoff != nil {
		for j, t := range m.Handoff.Targets {
			if !known(t) {
				ps.Add(fmt.Sprintf("/manifest/handoff/targets/%d", j), fmt.Sprintf("no installed agent %q", t))
			}
		}
	}
	if err := ps.err(wop.CodeValidation, agentruntime.MethodSpawn); err != nil {
		return nil, err
	}
	return NewEntry("", -1, m, prompt)
}

// check resolves the prompt pin and the MCP servers of one manifest.
func (c *Checker) check(ctx context.Context, ps *Problems, prefix string, m *agentruntime.Manifest) ResolvedPrompt {
	var prompt ResolvedPrompt
	if c.ResolvePrompt == nil {
		ps.Add(prefix+"/systemPromptRef", "cannot be resolved: the host has no promptLibrary")
	} else if p, err := c.ResolvePrompt(ctx, m.SystemPromptRef); err != nil {
		we := wop.AsError(err)
		ps.Add(prefix+"/systemPromptRef", fmt.Sprintf("%q does not resolve: %s (%s)", m.SystemPromptRef, we.Message, we.Code))
	} else {
		prompt = p
	}
	var servers []string
	ok := false
	if c.MCPServers != nil {
		servers, ok = c.MCPServers()
	}
	reported := map[string]bool{}
	for j, e := range m.ToolAllowlist {
		ref, err := agentruntime.ParseToolRef(e)
		if err != nil || reported[ref.ServerID] || slices.Contains(servers, ref.ServerID) {
			continue
		}
		reported[ref.ServerID] = true
		why := fmt.Sprintf("MCP server %q is not configured (the mcp plugin serves %s)", ref.ServerID, listOrNone(servers))
		if !ok {
			why = fmt.Sprintf("MCP server %q cannot be reached: mcp.client is not advertised", ref.ServerID)
		}
		ps.Add(fmt.Sprintf("%s/toolAllowlist/%d", prefix, j), why)
	}
	return prompt
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// fromManifestError turns the agentruntime package's field errors into
// Problems under prefix.
func fromManifestError(err error, prefix, code, what string) error {
	var me *agentruntime.ManifestError
	if !errors.As(err, &me) {
		return wop.Errorf(code, "%s: %v", what, err)
	}
	ps := make(Problems, len(me.Problems))
	for i, p := range me.Problems {
		ps[i] = Problem{Field: prefix + p.Pointer, Message: p.Message}
	}
	return ps.err(code, what)
}
