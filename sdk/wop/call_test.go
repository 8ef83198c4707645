package wop

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidVendorFamily(t *testing.T) {
	tests := []struct {
		name       string
		ok         bool
		reasonHas  string
		reasonSame string
	}{
		{name: "acme.kv", ok: true},
		{name: "acme-co.kv-2", ok: true},
		{name: "a1.b2", ok: true},
		{name: "acme.kv.watch", ok: true},
		{name: "Acme.kv", reasonHas: `"org.name"`},
		{name: "acme.KV", reasonHas: `"org.name"`},
		{name: "acme", reasonHas: `"org.name"`},
		{name: "", reasonHas: `"org.name"`},
		{name: "acme.", reasonHas: `"org.name"`},
		{name: ".kv", reasonHas: `"org.name"`},
		{name: "acme..kv", reasonHas: `"org.name"`},
		{name: "1acme.kv", reasonHas: `"org.name"`},
		{name: "acme.1kv", reasonHas: `"org.name"`},
		{name: "acme_co.kv", reasonHas: `"org.name"`},
		{name: "acme.kv ", reasonHas: `"org.name"`},
		{name: "openwop.kv", reasonSame: "the org openwop is reserved"},
		{name: "vendor.kv", reasonSame: "the org vendor is reserved"},
		{name: "effect-seams.kv", reasonSame: "the org effect-seams is reserved"},
		{name: "events.stream", reasonSame: "the org events is reserved"},
		{name: "events.stream.watch", reasonSame: "the org events is reserved"},
		{name: "openwop-x.kv", ok: true},
		{name: "acme.openwop", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := ValidVendorFamily(tt.name)
			if ok != tt.ok {
				t.Fatalf("ValidVendorFamily(%q) = %v (%q), want %v", tt.name, ok, reason, tt.ok)
			}
			switch {
			case tt.ok && reason != "":
				t.Errorf("reason = %q for a valid name", reason)
			case tt.reasonSame != "" && reason != tt.reasonSame:
				t.Errorf("reason = %q, want %q", reason, tt.reasonSame)
			case tt.reasonHas != "" && !strings.Contains(reason, tt.reasonHas):
				t.Errorf("reason = %q, want it to mention %s", reason, tt.reasonHas)
			}
		})
	}
}

func TestCoreFamilies(t *testing.T) {
	want := []string{FamilyAIEnvelope, FamilyPromptLibrary, FamilyAgentRuntime, FamilyAgents, FamilyMCP}
	got := CoreFamilies()
	if !slices.Equal(got, want) {
		t.Fatalf("CoreFamilies() = %v, want %v", got, want)
	}
	got[0] = "mutated"
	if CoreFamilies()[0] != FamilyAIEnvelope {
		t.Fatal("CoreFamilies shares its backing array")
	}
	for _, f := range want {
		if !IsCoreFamily(f) {
			t.Errorf("IsCoreFamily(%q) = false", f)
		}
	}
	for _, f := range []string{"", "acme.kv", "AIEnvelope", "aiEnvelope.await"} {
		if IsCoreFamily(f) {
			t.Errorf("IsCoreFamily(%q) = true", f)
		}
	}
}

func TestCallContextJSON(t *testing.T) {
	b, err := json.Marshal(CallContext{})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{}` {
		t.Errorf("zero CallContext JSON = %s, want {}", b)
	}
	in := CallContext{RunID: "run_1", Depth: 2, Deadline: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	b, err = json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"runId":"run_1","depth":2,"deadline":"2026-01-02T03:04:05.000000006Z"}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	var out CallContext
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Errorf("round trip = %+v, want %+v", out, in)
	}
}

func TestContextCarriesCallContext(t *testing.T) {
	if _, ok := CallContextFrom(context.Background()); ok {
		t.Fatal("background context carries a call context")
	}
	c := CallContext{RunID: "run_1", Depth: 1}
	ctx := WithCallContext(context.Background(), c)
	got, ok := CallContextFrom(ctx)
	if !ok || got != c {
		t.Fatalf("CallContextFrom = %+v, %v; want %+v", got, ok, c)
	}
	inner := WithCallContext(ctx, CallContext{RunID: "run_2"})
	if got, _ := CallContextFrom(inner); got.RunID != "run_2" {
		t.Fatalf("inner call context = %+v", got)
	}
}
