package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// honestStore answers a pinned get the way a faithful plugin does, from
// name → version → raw, and counts what it was asked.
type honestStore struct {
	mu    sync.Mutex
	asked []string
	raws  map[string]map[string]string
}

func (s *honestStore) next(payload []byte) ([]byte, error) {
	var req promptlibrary.GetRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.asked = append(s.asked, req.PromptID)
	s.mu.Unlock()
	pin, err := promptlibrary.ParsePin(req.PromptID)
	if err != nil {
		return nil, wop.Errorf(promptlibrary.CodePromptUnpinned, "%v", err)
	}
	raw, ok := s.raws[pin.Name][pin.Version]
	if !ok {
		return nil, wop.Errorf(promptlibrary.CodePromptVersionNotFound, "no %s", pin)
	}
	return json.Marshal(promptlibrary.Prompt{PromptID: req.PromptID, Name: pin.Name, Version: pin.Version,
		Digest: promptlibrary.DigestOf([]byte(raw)), SystemPrompt: raw, Raw: raw})
}

func getPayload(id string) []byte {
	b, _ := json.Marshal(promptlibrary.GetRequest{PromptID: id})
	return b
}

func TestPromptPolicyLockMapAndTrace(t *testing.T) {
	st := &honestStore{raws: map[string]map[string]string{"sys": {"1": "one", "2": "two"}}}
	d1 := promptlibrary.DigestOf([]byte("one"))
	locks := map[string]map[string]string{"demo.pack": {"sys": "sys@1#" + d1, "broken": "broken@latest"}}
	p := NewPromptPolicy(func(pack string) map[string]string { return locks[pack] })
	tr, stop := p.Track("run1", nil)
	defer stop()
	call := wop.CallContext{RunID: "run1", Pack: "demo.pack"}

	out, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys"), st.next)
	if err != nil {
		t.Fatal(err)
	}
	var ans promptlibrary.Prompt
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatal(err)
	}
	if ans.PromptID != "sys" || ans.Raw != "one" || st.asked[0] != "sys@1#"+d1 {
		t.Errorf("answer %+v after asking %v", ans, st.asked)
	}
	if _, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys@2"), st.next); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys"), st.next); err != nil {
		t.Fatal(err)
	}
	got := tr.Resolved()
	if len(got) != 2 || got[0].PromptID != "sys" || got[0].Digest != d1 || got[1].PromptID != "sys@2" || got[1].Version != "2" {
		t.Errorf("trace = %+v", got)
	}

	for _, id := range []string{"other", "broken", "sys@latest"} {
		asked := len(st.asked)
		_, err := p.Call(context.Background(), Caller{}, call, "get", getPayload(id), st.next)
		if wop.CodeOf(err) != promptlibrary.CodePromptUnpinned {
			t.Errorf("%s: %v, want prompt_unpinned", id, err)
		}
		if len(st.asked) != asked {
			t.Errorf("%s reached the plugin", id)
		}
	}
	// No pack (the operator): no lock map.
	if _, err := p.Call(context.Background(), Caller{}, wop.CallContext{RunID: "x"}, "get", getPayload("sys"), st.next); wop.CodeOf(err) != promptlibrary.CodePromptUnpinned {
		t.Errorf("operator bare name: %v", err)
	}
	if _, err := p.Call(context.Background(), Caller{}, call, "get", []byte(`{"promptId":"sys@1","extra":1}`), st.next); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("unknown field: %v", err)
	}
}

func TestPromptPolicyReplay(t *testing.T) {
	st := &honestStore{raws: map[string]map[string]string{"sys": {"1": "one", "2": "two"}}}
	p := NewPromptPolicy(func(string) map[string]string { return map[string]string{"sys": "sys@2"} })
	d1 := promptlibrary.DigestOf([]byte("one"))
	_, stop := p.Track("r", []ResolvedPrompt{{PromptID: "sys", Name: "sys", Version: "1", Digest: d1}})
	defer stop()
	call := wop.CallContext{RunID: "r", Pack: "demo.pack"}
	out, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys"), st.next)
	if err != nil {
		t.Fatal(err)
	}
	var ans promptlibrary.Prompt
	_ = json.Unmarshal(out, &ans)
	if ans.Raw != "one" || st.asked[0] != "sys@1#"+d1 {
		t.Errorf("replay resolved %q by asking %v; want the recorded version 1", ans.Raw, st.asked)
	}
	if _, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys@2"), st.next); wop.CodeOf(err) != promptlibrary.CodePromptUnpinned {
		t.Errorf("unrecorded prompt in a replay: %v", err)
	}
}

// Unfaithful answers never reach the caller.
func TestPromptPolicyChecksAnswers(t *testing.T) {
	p := NewPromptPolicy(func(string) map[string]string { return nil })
	call := wop.CallContext{RunID: "r"}
	good := promptlibrary.Prompt{Name: "sys", Version: "1", Raw: "one", Digest: promptlibrary.DigestOf([]byte("one"))}
	lies := map[string]func(p *promptlibrary.Prompt){
		"tampered raw":  func(p *promptlibrary.Prompt) { p.Raw = "two" },
		"other version": func(p *promptlibrary.Prompt) { p.Version = "2" },
		"other name":    func(p *promptlibrary.Prompt) { p.Name = "x" },
	}
	for label, lie := range lies {
		ans := good
		lie(&ans)
		next := func([]byte) ([]byte, error) { return json.Marshal(ans) }
		if _, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys@1"), next); wop.CodeOf(err) != promptlibrary.CodePromptDigestMismatch {
			t.Errorf("%s: %v, want prompt_digest_mismatch", label, err)
		}
	}
	next := func([]byte) ([]byte, error) { return []byte(`"not a prompt"`), nil }
	if _, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys@1"), next); wop.CodeOf(err) != wop.CodeUpstreamUnavailable {
		t.Errorf("garbage answer: %v", err)
	}
	other := promptlibrary.DigestOf([]byte("other"))
	next = func([]byte) ([]byte, error) { return json.Marshal(good) }
	if _, err := p.Call(context.Background(), Caller{}, call, "get", getPayload("sys@1#"+other), next); wop.CodeOf(err) != promptlibrary.CodePromptDigestMismatch {
		t.Errorf("answer with another digest than pinned: %v", err)
	}
}

func TestPromptPolicyConcurrentRuns(t *testing.T) {
	st := &honestStore{raws: map[string]map[string]string{"sys": {"1": "one"}}}
	p := NewPromptPolicy(func(string) map[string]string { return nil })
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("run%d", i)
			tr, stop := p.Track(id, nil)
			defer stop()
			for range 10 {
				if _, err := p.Call(context.Background(), Caller{}, wop.CallContext{RunID: id}, "get", getPayload("sys@1"), st.next); err != nil {
					t.Error(err)
				}
			}
			if n := len(tr.Resolved()); n != 1 {
				t.Errorf("%s resolved %d prompts, want 1", id, n)
			}
		}()
	}
	wg.Wait()
}
