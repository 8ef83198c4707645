package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/strictjson"
	"github.com/wophost/wophost/sdk/wop"
)

// AgentPolicy is the host's side of agentRuntime.spawn (docs/contract.md §4.3).
// The agent registry lives in the host, so the runtime plugin learns a
// manifest only from the spawn request:
//
//   - spawn{manifestId} gets the registry's canonical manifest added
//     beside the id; an id the registry does not hold fails with
//     agent_not_found before the plugin is called.
//   - spawn{manifest} (inline) gets the checks of an install: the manifest
//     must be valid, its systemPromptRef must resolve, its MCP servers must
//     be configured and its handoff targets installed; otherwise
//     validation_error naming each field under /manifest. The host then
//     remembers the manifest by digest, so that the agent's tool calls are
//     checked against its allowlist like those of an installed agent.
//   - The plugin's answer must report the digest of the manifest sent.
//
// Other methods pass through unchanged. It is safe for concurrent use.
type AgentPolicy struct {
	reg   *agents.Registry
	check *agents.Checker
}

// NewAgentPolicy returns the policy over reg; check runs the install
// checks of inline manifests.
func NewAgentPolicy(reg *agents.Registry, check *agents.Checker) *AgentPolicy {
	return &AgentPolicy{reg: reg, check: check}
}

// Call implements Policy.
func (p *AgentPolicy) Call(ctx context.Context, _ Caller, _ wop.CallContext, method string, payload []byte, next func([]byte) ([]byte, error)) ([]byte, error) {
	if method != agentruntime.MethodSpawn {
		return next(payload)
	}
	fail := func(code, format string, args ...any) *wop.Error {
		return wop.Errorf(code, format, args...).WithCapability(agentruntime.CapabilitySpawn)
	}
	if t := bytes.TrimSpace(payload); len(t) == 0 || string(t) == "null" {
		return nil, fail(wop.CodeValidation, "spawn request: a JSON object is required")
	}
	// The manifest is decided on the members the plugin will read: a
	// spelling it could read differently is refused. The rest is sent on
	// as it came.
	if _, err := strictjson.Members(payload, "spawn request", "manifestId", "manifest"); err != nil {
		return nil, wop.AsError(err).WithCapability(agentruntime.CapabilitySpawn)
	}
	var req map[string]json.RawMessage
	if err := strictjson.Decode(payload, &req, "spawn request"); err != nil || req == nil {
		return nil, fail(wop.CodeValidation, "spawn request: a JSON object is required")
	}
	var id string
	if raw, ok := req["manifestId"]; ok && !isNull(raw) {
		if err := strictjson.Decode(raw, &id, "spawn request"); err != nil {
			return nil, fail(wop.CodeValidation, "manifestId: must be a string").WithDetails(map[string]string{"pointer": "/manifestId"})
		}
	}
	inline, hasInline := req["manifest"]
	hasInline = hasInline && !isNull(inline)
	var digest string
	switch {
	case id != "" && hasInline:
		return nil, fail(wop.CodeValidation, "set one of manifestId and manifest, not both").WithDetails(map[string]string{"pointer": "/manifest"})
	case id != "":
		e, ok := p.reg.Get(id)
		if !ok {
			return nil, fail(agentruntime.CodeAgentNotFound, "no installed agent manifest %q", id).WithDetails(map[string]string{"manifestId": id})
		}
		req["manifest"] = e.Canonical
		digest = e.Digest
	case hasInline:
		e, err := p.check.CheckInline(ctx, inline, p.reg.Has)
		if err != nil {
			return nil, wop.AsError(err).WithCapability(agentruntime.CapabilitySpawn)
		}
		if err := p.reg.RememberInline(e.Digest, e.Manifest()); err != nil {
			if errors.Is(err, agents.ErrInlineFull) {
				return nil, fail(agentruntime.CodeAgentSpawnQuotaExhausted, "%v", err)
			}
			return nil, fail(wop.CodeInternal, "%v", err)
		}
		req["manifest"] = e.Canonical
		digest = e.Digest
	default:
		return nil, fail(wop.CodeValidation, "one of manifestId and manifest is required").WithDetails(map[string]string{"pointer": "/manifestId"})
	}
	sent, err := json.Marshal(req)
	if err != nil {
		return nil, fail(wop.CodeInternal, "encode spawn request: %v", err)
	}
	out, err := next(sent)
	if err != nil {
		return nil, err
	}
	var res agentruntime.SpawnResult
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fail(wop.CodeUpstreamUnavailable, "the agentRuntime plugin's answer to spawn is not a spawn result: %v", err)
	}
	if res.ManifestDigest != digest {
		return nil, fail(wop.CodeUpstreamUnavailable, "the agentRuntime plugin reports manifest digest %q for a manifest whose digest is %s", res.ManifestDigest, digest)
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// AgentCaller is a parsed agent identity from a call context's Caller:
// "agent:<agentInstanceId>@<manifestDigest>".
type AgentCaller struct {
	InstanceID string
	Digest     string
}

// ParseAgentCaller parses an agent caller; ok is false when caller does
// not claim to be an agent.
func ParseAgentCaller(caller string) (AgentCaller, bool, error) {
	rest, ok := strings.CutPrefix(caller, "agent:")
	if !ok {
		return AgentCaller{}, false, nil
	}
	at := strings.LastIndexByte(rest, '@')
	if at <= 0 || at == len(rest)-1 {
		return AgentCaller{}, true, fmt.Errorf("caller %q is not agent:<agentInstanceId>@<manifestDigest>", caller)
	}
	return AgentCaller{InstanceID: rest[:at], Digest: rest[at+1:]}, true, nil
}
