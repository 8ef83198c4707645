package agents

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

const pin = "t/a@1#sha256:0000000000000000000000000000000000000000000000000000000000000001"

func manifest(id, extra string) json.RawMessage {
	return json.RawMessage(`{"id":"` + id + `","name":"N","description":"D","systemPromptRef":"` + pin + `","toolAllowlist":["tools/add"]` + extra + `}`)
}

// checker resolves only pin and serves the MCP server "tools".
func checker() *Checker {
	return &Checker{
		ResolvePrompt: func(_ context.Context, ref string) (ResolvedPrompt, error) {
			if ref != pin {
				return ResolvedPrompt{}, wop.Errorf("prompt_not_found", "no %s", ref)
			}
			return ResolvedPrompt{Ref: ref, Name: "t/a", Version: "1", Digest: "sha256:01"}, nil
		},
		MCPServers: func() ([]string, bool) { return []string{"tools"}, true },
	}
}

func problems(t *testing.T, err error) []string {
	t.Helper()
	we := wop.AsError(err)
	var d struct {
		Problems []Problem `json:"problems"`
	}
	if err := json.Unmarshal(we.Details, &d); err != nil {
		t.Fatalf("details %s: %v", we.Details, err)
	}
	var out []string
	for _, p := range d.Problems {
		out = append(out, p.Field)
	}
	return out
}

func TestCheckPack(t *testing.T) {
	c := checker()
	entries, err := c.CheckPack(context.Background(), "p", []json.RawMessage{manifest("a", ""), manifest("b", `,"handoff":{"targets":["a"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].SystemPrompt.Version != "1" || !strings.HasPrefix(entries[1].Digest, "sha256:") || entries[1].Index != 1 {
		t.Fatalf("entries %+v", entries)
	}
	// Every problem at once, each named by its pointer from pack.json.
	bad := []json.RawMessage{
		json.RawMessage(`{"id":"x","name":"N","description":"D","systemPromptRef":"t/a@9","toolAllowlist":["tools/add","web/get","web/put"]}`),
		json.RawMessage(`{"id":"y","name":"N","description":"D","systemPromptRef":"t/a","toolAllowlist":[]}`),
	}
	_, err = c.CheckPack(context.Background(), "p", bad[:1])
	if wop.CodeOf(err) != wop.CodePackValidationFailed {
		t.Fatalf("err %v", err)
	}
	if got := strings.Join(problems(t, err), " "); got != "/agents/0/systemPromptRef /agents/0/toolAllowlist/1" {
		t.Errorf("problems %s", got)
	}
	_, err = c.CheckPack(context.Background(), "p", bad)
	if got := strings.Join(problems(t, err), " "); got != "/agents/1/systemPromptRef" {
		t.Errorf("unpinned: problems %s", got)
	}
	// Without mcp.client every server is unknown.
	c.MCPServers = func() ([]string, bool) { return nil, false }
	_, err = c.CheckPack(context.Background(), "p", []json.RawMessage{manifest("a", "")})
	if got := strings.Join(problems(t, err), " "); got != "/agents/0/toolAllowlist/0" || !strings.Contains(err.Error(), "mcp.client is not advertised") {
		t.Errorf("no mcp: %v", err)
	}
}

func TestCheckInline(t *testing.T) {
	c := checker()
	e, err := c.CheckInline(context.Background(), manifest("a", `,"handoff":{"targets":["b"]}`), func(id string) bool { return id == "b" })
	if err != nil || e.ID != "a" {
		t.Fatalf("inline: %+v %v", e, err)
	}
	_, err = c.CheckInline(context.Background(), manifest("a", `,"handoff":{"targets":["ghost"]}`), func(string) bool { return false })
	if wop.CodeOf(err) != wop.CodeValidation || strings.Join(problems(t, err), " ") != "/manifest/handoff/targets/0" {
		t.Errorf("inline handoff: %v", err)
	}
	_, err = c.CheckInline(context.Background(), json.RawMessage(`{"id":"a"}`), func(string) bool { return false })
	if wop.CodeOf(err) != wop.CodeValidation || !strings.Contains(err.Error(), "/manifest/systemPromptRef") {
		t.Errorf("inline invalid: %v", err)
	}
}

func TestRegistryInstall(t *testing.T) {
	c := checker()
	r := New()
	first, err := c.CheckPack(context.Background(), "first", []json.RawMessage{manifest("a", "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Install(first); err != nil {
		t.Fatal(err)
	}
	// A later pack may hand off to an installed agent, not reuse its id,
	// and not name an agent nobody installed; a refused set installs
	// nothing.
	second, _ := c.CheckPack(context.Background(), "second", []json.RawMessage{
		manifest("b", `,"handoff":{"targets":["a"]}`), manifest("a", ""), manifest("c", `,"handoff":{"targets":["ghost"]}`),
	})
	err = r.Install(second)
	if got := strings.Join(problems(t, err), " "); got != "/agents/1/id /agents/2/handoff/targets/0" {
		t.Errorf("problems %s (%v)", got, err)
	}
	if r.Has("b") || len(r.List()) != 1 {
		t.Errorf("a refused set was partly installed: %v", r.List())
	}
	third, _ := c.CheckPack(context.Background(), "third", []json.RawMessage{manifest("b", `,"handoff":{"targets":["a"]}`)})
	if err := r.Install(third); err != nil {
		t.Fatal(err)
	}
	list := r.List()
	if len(list) != 2 || list[0].ID != "a" || list[1].ID != "b" || list[1].Pack != "third" {
		t.Errorf("list %+v", list)
	}
	if m, ok := r.ByDigest(list[1].Digest); !ok || m.ID != "b" {
		t.Errorf("by digest: %v %v", m, ok)
	}
	inline, _ := c.CheckInline(context.Background(), manifest("z", ""), r.Has)
	if err := r.RememberInline(inline.Digest, inline.Manifest()); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ByDigest(inline.Digest); !ok || r.Has("z") {
		t.Error("an inline manifest is known by digest only")
	}
	// A reload's next registry carries the inline manifests over, and
	// only them: installed agents are installed again by their packs.
	next := New()
	next.CarryInline(r)
	if m, ok := next.ByDigest(inline.Digest); !ok || m.ID != "z" {
		t.Errorf("the inline manifest after CarryInline: %v %v", m, ok)
	}
	if _, ok := next.ByDigest(list[1].Digest); ok || len(next.List()) != 0 {
		t.Error("CarryInline carried an installed agent")
	}
}
