package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/strictjson"
	"github.com/wophost/wophost/sdk/wop"
)

// ResolvedPrompt is one prompt a run resolved: what the node asked for,
// what the host sent to the plugin, and what came back. Run records list
// them, and a replay resolves by them.
type ResolvedPrompt struct {
	// PromptID is the reference exactly as the node asked for it.
	PromptID string `json:"promptId"`
	// Pin is the reference the plugin was asked for, after the lock map or
	// the replayed record rewrote a bare name.
	Pin     string `json:"pin"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// PromptPolicy is the host's side of promptLibrary.get (docs/contract.md §4.2):
//
//   - A bare name resolves only through the calling pack's prompts lock
//     map; the plugin is asked for the locked pin. Any other unpinned form
//     fails with prompt_unpinned before a plugin is called.
//   - Every answer is checked before the caller sees it: raw must hash to
//     the digest, and name, version and digest must be the pinned ones, or
//     the call fails with prompt_digest_mismatch. This guards against a
//     buggy or lying plugin; the plugin checks its own store too.
//   - The answer's promptId is the one the node asked for, so an original
//     run and its replay see the same answer.
//   - Each run's resolutions are recorded (Track), and a replayed run
//     resolves each reference to the exact version and digest its record
//     holds, and refuses references the record does not hold.
//
// It is safe for concurrent use.
type PromptPolicy struct {
	lockMap func(pack string) map[string]string

	mu     sync.Mutex
	traces map[string]*PromptTrace
}

// NewPromptPolicy returns the policy. lockMap returns the prompts lock map
// of a loaded pack (nil when it has none).
func NewPromptPolicy(lockMap func(pack string) map[string]string) *PromptPolicy {
	return &PromptPolicy{lockMap: lockMap, traces: map[string]*PromptTrace{}}
}

// PromptTrace collects the prompts one run resolved.
type PromptTrace struct {
	mu       sync.Mutex
	resolved []ResolvedPrompt
	// replay, when not nil, is the only resolution allowed: reference as
	// the node asks it → recorded resolution.
	replay map[string]ResolvedPrompt
}

// Resolved returns the prompts resolved so far, each reference once, in
// the order first asked.
func (t *PromptTrace) Resolved() []ResolvedPrompt {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]ResolvedPrompt(nil), t.resolved...)
}

func (t *PromptTrace) add(r ResolvedPrompt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, old := range t.resolved {
		if old.PromptID == r.PromptID {
			return
		}
	}
	t.resolved = append(t.resolved, r)
}

// Track starts recording the prompts of run runID and returns the trace
// and a function that stops tracking. replay, when not nil, switches the
// run to replay mode: only those resolutions are used (an empty, non-nil
// slice allows none).
func (p *PromptPolicy) Track(runID string, replay []ResolvedPrompt) (*PromptTrace, func()) {
	t := &PromptTrace{}
	if replay != nil {
		t.replay = make(map[string]ResolvedPrompt, len(replay))
		for _, r := range replay {
			t.replay[r.PromptID] = r
		}
	}
	p.mu.Lock()
	p.traces[runID] = t
	p.mu.Unlock()
	return t, func() {
		p.mu.Lock()
		delete(p.traces, runID)
		p.mu.Unlock()
	}
}

func (p *PromptPolicy) trace(runID string) *PromptTrace {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.traces[runID]
}

// Call implements Policy.
func (p *PromptPolicy) Call(_ context.Context, _ Caller, call wop.CallContext, method string, payload []byte, next func([]byte) ([]byte, error)) ([]byte, error) {
	if method != promptlibrary.MethodGet {
		return next(payload)
	}
	fail := func(code, format string, args ...any) *wop.Error {
		return wop.Errorf(code, format, args...).WithCapability(promptlibrary.CapabilityGet)
	}
	// The pin is decided on the request as the plugin reads it.
	var req promptlibrary.GetRequest
	if err := strictjson.Decode(payload, &req, "get request"); err != nil {
		return nil, wop.AsError(err).WithCapability(promptlibrary.CapabilityGet)
	}
	tr := p.trace(call.RunID)
	pin, err := p.pin(call, tr, req.PromptID)
	if err != nil {
		return nil, err
	}
	sent, err := json.Marshal(promptlibrary.GetRequest{PromptID: pin.String()})
	if err != nil {
		return nil, fail(wop.CodeInternal, "encode get request: %v", err)
	}
	out, err := next(sent)
	if err != nil {
		return nil, err
	}
	var ans promptlibrary.Prompt
	if err := json.Unmarshal(out, &ans); err != nil {
		return nil, fail(wop.CodeUpstreamUnavailable, "the promptLibrary plugin's answer to %s is not a prompt: %v", pin, err)
	}
	if err := promptlibrary.CheckAnswer(&ans, pin); err != nil {
		return nil, fail(promptlibrary.CodePromptDigestMismatch, "%v", err).
			WithDetails(map[string]string{"promptId": req.PromptID, "pin": pin.String()})
	}
	ans.PromptID = req.PromptID
	res, err := json.Marshal(&ans)
	if err != nil {
		return nil, fail(wop.CodeInternal, "encode prompt: %v", err)
	}
	if tr != nil {
		tr.add(ResolvedPrompt{PromptID: req.PromptID, Pin: pin.String(), Name: ans.Name, Version: ans.Version, Digest: ans.Digest})
	}
	return res, nil
}

// pin decides what the plugin is asked for: the replayed resolution, the
// lock map's pin for a bare name, or the node's own pin.
func (p *PromptPolicy) pin(call wop.CallContext, tr *PromptTrace, promptID string) (promptlibrary.Pin, error) {
	unpinned := func(format string, args ...any) error {
		return wop.Errorf(promptlibrary.CodePromptUnpinned, format, args...).
			WithCapability(promptlibrary.CapabilityGet).
			WithDetails(map[string]string{"promptId": promptID})
	}
	if tr != nil && tr.replay != nil {
		rec, ok := tr.replay[promptID]
		if !ok {
			return promptlibrary.Pin{}, unpinned("this replay's run record resolved no prompt %q, so nothing pins it", promptID)
		}
		pin := promptlibrary.Pin{Name: rec.Name, Version: rec.Version, Digest: rec.Digest}
		if _, err := promptlibrary.ParsePin(pin.String()); err != nil {
			return promptlibrary.Pin{}, unpinned("the run record's resolution of %q is not a pin: %v", promptID, err)
		}
		return pin, nil
	}
	if promptlibrary.IsBareName(promptID) {
		if call.Pack == "" {
			return promptlibrary.Pin{}, unpinned("%q is a bare prompt name and the caller has no pack lock map; pin it as name@<version> or name@sha256:<hex>", promptID)
		}
		locked, ok := p.lockMap(call.Pack)[promptID]
		if !ok {
			return promptlibrary.Pin{}, unpinned("%q is a bare prompt name and pack %s does not lock it; add it to the pack's prompts map (host prompts lock)", promptID, call.Pack)
		}
		pin, err := promptlibrary.ParsePin(locked)
		if err != nil {
			return promptlibrary.Pin{}, unpinned("pack %s locks %q to %q, which is not a pin: %v", call.Pack, promptID, locked, err)
		}
		return pin, nil
	}
	pin, err := promptlibrary.ParsePin(promptID)
	if err != nil {
		return promptlibrary.Pin{}, unpinned("%v", err)
	}
	return pin, nil
}

// String formats r for messages.
func (r ResolvedPrompt) String() string {
	return fmt.Sprintf("%s → %s@%s#%s", r.PromptID, r.Name, r.Version, r.Digest)
}
