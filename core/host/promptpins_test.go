package host

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// pinStore stands in for the promptLibrary plugin: it serves the raw
// texts it holds by pin, answers code for every other pin, and counts
// the gets.
type pinStore struct {
	held map[string]string // pin -> raw
	code string
	gets int
}

func (s *pinStore) Invoke(_ context.Context, family, method string, payload []byte, _ wop.CallContext) ([]byte, error) {
	s.gets++
	var req promptlibrary.GetRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	raw, ok := s.held[req.PromptID]
	if !ok {
		return nil, wop.Errorf(s.code, "no %s here", req.PromptID)
	}
	pin, err := promptlibrary.ParsePin(req.PromptID)
	if err != nil {
		return nil, err
	}
	return json.Marshal(promptlibrary.Prompt{PromptID: req.PromptID, Name: pin.Name, Version: pin.Version,
		Digest: promptlibrary.DigestOf([]byte(raw)), Raw: raw, SystemPrompt: raw})
}

// A pack is refused at load for a pin the store answers it does not hold,
// and for no other answer: a held pin, or a store that cannot say, lets
// it load; so does a host that does not advertise promptLibrary.
func TestCheckPromptPins(t *testing.T) {
	const raw = "---\nname: team/greet\n---\nHello.\n"
	held := "team/greet@1#" + promptlibrary.DigestOf([]byte(raw))
	// The near miss: the same name and digest, another version.
	gone := "team/greet@2#" + promptlibrary.DigestOf([]byte(raw))
	for _, tc := range []struct {
		name      string
		lock      map[string]string
		code      string
		advertise bool
		refused   bool
	}{
		{"held", map[string]string{"team/greet": held}, promptlibrary.CodePromptVersionNotFound, true, false},
		{"version gone", map[string]string{"team/greet": gone}, promptlibrary.CodePromptVersionNotFound, true, true},
		{"name gone", map[string]string{"a": held, "team/greet": gone}, promptlibrary.CodePromptNotFound, true, true},
		{"bytes changed", map[string]string{"team/greet": gone}, promptlibrary.CodePromptDigestMismatch, true, true},
		{"store unreadable", map[string]string{"team/greet": gone}, promptlibrary.CodePromptStoreUnavailable, true, false},
		{"plugin restarting", map[string]string{"team/greet": gone}, wop.CodeUnavailable, true, false},
		{"not advertised", map[string]string{"team/greet": gone}, promptlibrary.CodePromptVersionNotFound, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Host: config.Host{StateDir: t.TempDir(), CallDepthLimit: config.DefaultCallDepthLimit, MaxMessageBytes: config.DefaultMaxMessageBytes}}
			h := New(cfg, config.NewLoader(), hclog.NewNullLogger(), "test")
			store := &pinStore{held: map[string]string{held: raw}, code: tc.code}
			if tc.advertise {
				h.reg.Declare("prompts", "wophost-promptlib")
				h.reg.Describe("prompts", "wophost-promptlib", "1.0.0", nil)
				h.reg.Ready("prompts", []registry.Family{{Name: wop.FamilyPromptLibrary, Methods: []string{promptlibrary.MethodGet}}}, store)
			}
			p := &Pack{Name: "private.test.pins", manifest: &packmanifest.Manifest{Prompts: tc.lock}}
			err := h.checkPromptPins(context.Background(), p)
			if tc.advertise && store.gets == 0 {
				t.Errorf("the store was not asked")
			}
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			we := wop.AsError(err)
			if we == nil || we.Code != wop.CodePackValidationFailed || !strings.Contains(we.Message, gone) || !strings.Contains(we.Message, `"team/greet"`) || !strings.Contains(we.Message, tc.code) {
				t.Fatalf("err = %v, want pack_validation_failed naming %q, %s and %s", err, "team/greet", gone, tc.code)
			}
		})
	}
}
