package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// fakeInvoker answers every call with its name, so a test can tell which
// invoker a lookup returned.
type fakeInvoker struct{ name string }

func (f *fakeInvoker) Invoke(context.Context, string, string, []byte, wop.CallContext) ([]byte, error) {
	return []byte(f.name), nil
}

const docHead = `{"protocolVersions":["2.0"],"preferredVersion":"2.0","implementation":{"name":"wophost","version":"1.2.3"}`

func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r := New(Implementation{Name: "wophost", Version: "1.2.3"})
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var tick int
	r.mu.Lock()
	r.now = func() time.Time { tick++; return base.Add(time.Duration(tick) * time.Second) }
	r.mu.Unlock()
	return r
}

// serve declares capability name and makes it ready with families.
func serve(r *Registry, name string, families ...Family) Invoker {
	inv := &fakeInvoker{name: name}
	r.Declare(name, "plugin-"+name)
	r.Ready(name, families, inv)
	return inv
}

func facets(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

func assertDoc(t *testing.T, r *Registry, want string) {
	t.Helper()
	got := r.Document()
	if string(got) != want {
		t.Fatalf("document:\n got %s\nwant %s", got, want)
	}
	if !json.Valid(got) {
		t.Fatalf("document is not valid JSON: %s", got)
	}
}

func TestDocumentEmpty(t *testing.T) {
	r := newTestRegistry(t)
	assertDoc(t, r, docHead+`}`)
	if got := r.Advertised(); len(got) != 0 {
		t.Errorf("Advertised() = %v, want empty", got)
	}
	if got := r.Records(); len(got) != 0 {
		t.Errorf("Records() = %v, want empty", got)
	}
}

func TestDocumentRendering(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *Registry)
		want  string
	}{
		{
			name: "core family with facets, keys sorted, numbers kept",
			setup: func(r *Registry) {
				serve(r, "ai", Family{
					Name:    wop.FamilyAIEnvelope,
					Methods: []string{"generate", "await"},
					Facets: facets(
						"zeta", `{}`,
						"await", `{"b": 2, "a": {"y": 1, "x": 12345678901234567890}, "list": [3, 1.50, {"q": true, "p": null}]}`,
						"models", `["b","a"]`,
					),
				})
			},
			want: docHead + `,"aiEnvelope":{"status":"experimental","since":"2.0",` +
				`"await":{"a":{"x":12345678901234567890,"y":1},"b":2,"list":[3,1.50,{"p":null,"q":true}]},` +
				`"models":["b","a"],"zeta":{}}}`,
		},
		{
			name: "status, since, until and witness as given",
			setup: func(r *Registry) {
				serve(r, "mcp", Family{
					Name: wop.FamilyMCP, Status: "stable", Since: "2.1", Until: "2027-06-30", Witness: "claims-check",
					Facets: facets("client", `{}`),
				})
			},
			want: docHead + `,"mcp":{"status":"stable","since":"2.1","until":"2027-06-30","witness":"claims-check","client":{}}}`,
		},
		{
			name: "facets named like record fields are not repeated",
			setup: func(r *Registry) {
				serve(r, "mcp", Family{
					Name:   wop.FamilyMCP,
					Facets: facets("status", `"stable"`, "since", `"9"`, "until", `"x"`, "witness", `"y"`, "client", `{}`),
				})
			},
			want: docHead + `,"mcp":{"status":"experimental","since":"2.0","client":{}}}`,
		},
		{
			name: "empty or invalid facet settings become {}",
			setup: func(r *Registry) {
				serve(r, "mcp", Family{
					Name:   wop.FamilyMCP,
					Facets: facets("client", ``, "server", `{not json`),
				})
			},
			want: docHead + `,"mcp":{"status":"experimental","since":"2.0","client":{},"server":{}}}`,
		},
		{
			name: "core families in contract order whatever the declaration order",
			setup: func(r *Registry) {
				serve(r, "m", Family{Name: wop.FamilyMCP})
				serve(r, "p", Family{Name: wop.FamilyPromptLibrary})
				serve(r, "a", Family{Name: wop.FamilyAIEnvelope})
			},
			want: docHead +
				`,"aiEnvelope":{"status":"experimental","since":"2.0"}` +
				`,"promptLibrary":{"status":"experimental","since":"2.0"}` +
				`,"mcp":{"status":"experimental","since":"2.0"}}`,
		},
		{
			name: "vendor families under extensions sorted by name, after the core families",
			setup: func(r *Registry) {
				serve(r, "zeta", Family{Name: "zeta.store", Facets: facets("watch", `{"max":10}`)})
				serve(r, "acme", Family{Name: "acme.kv", Status: "stable"}, Family{Name: "acme.blob"})
				serve(r, "ai", Family{Name: wop.FamilyAIEnvelope})
			},
			want: docHead +
				`,"aiEnvelope":{"status":"experimental","since":"2.0"}` +
				`,"extensions":{` +
				`"acme.blob":{"status":"experimental","since":"2.0"},` +
				`"acme.kv":{"status":"stable","since":"2.0"},` +
				`"zeta.store":{"status":"experimental","since":"2.0","watch":{"max":10}}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRegistry(t)
			tt.setup(r)
			assertDoc(t, r, tt.want)
		})
	}
}

func TestDocumentImplementationEscaped(t *testing.T) {
	r := New(Implementation{Name: `wop"host`, Version: "1.0"})
	want := `{"protocolVersions":["2.0"],"preferredVersion":"2.0","implementation":{"name":"wop\"host","version":"1.0"}}`
	if got := string(r.Document()); got != want {
		t.Fatalf("document:\n got %s\nwant %s", got, want)
	}
}

func TestNeedsWithheldUntilReady(t *testing.T) {
	r := newTestRegistry(t)
	r.Declare("kv", "plugin-kv")
	serve(r, "watch", Family{Name: "acme.watch", Needs: []string{"acme.kv"}})

	assertDoc(t, r, docHead+`}`)
	if r.Has("acme.watch", "") {
		t.Fatal("acme.watch advertised while acme.kv is not")
	}
	if _, _, ok := r.Lookup("acme.watch"); ok {
		t.Fatal("Lookup found a withheld family")
	}
	if recs := r.Records(); recs[1].Advertised != nil {
		t.Fatalf("watch Advertised = %v, want nil", recs[1].Advertised)
	}

	r.Ready("kv", []Family{{Name: "acme.kv"}}, &fakeInvoker{name: "kv"})
	assertDoc(t, r, docHead+`,"extensions":{`+
		`"acme.kv":{"status":"experimental","since":"2.0"},`+
		`"acme.watch":{"status":"experimental","since":"2.0"}}}`)
	if !r.Has("acme.watch", "") {
		t.Fatal("acme.watch not advertised once acme.kv is ready")
	}
	if recs := r.Records(); !slices.Equal(recs[1].Advertised, []string{"acme.watch"}) {
		t.Fatalf("watch Advertised = %v", recs[1].Advertised)
	}

	// Withdrawing the need withholds the dependant again.
	r.Crash("kv", errors.New("boom"))
	assertDoc(t, r, docHead+`}`)
	if r.Has("acme.watch", "") {
		t.Fatal("acme.watch still advertised after acme.kv crashed")
	}
}

func TestNeedsFacetAndChains(t *testing.T) {
	tests := []struct {
		name     string
		families map[string][]Family // capability → families, declared in sorted order
		want     []string            // advertised families, sorted
	}{
		{
			name: "needs a vendor facet that is served",
			families: map[string][]Family{
				"a": {{Name: "acme.kv", Facets: facets("watch", `{}`)}},
				"b": {{Name: "acme.sync", Needs: []string{"acme.kv.watch"}}},
			},
			want: []string{"acme.kv", "acme.sync"},
		},
		{
			name: "needs a vendor facet that is missing",
			families: map[string][]Family{
				"a": {{Name: "acme.kv"}},
				"b": {{Name: "acme.sync", Needs: []string{"acme.kv.watch"}}},
			},
			want: []string{"acme.kv"},
		},
		{
			name: "needs a core facet",
			families: map[string][]Family{
				"a": {{Name: wop.FamilyAIEnvelope, Facets: facets("await", `{}`)}},
				"b": {{Name: "acme.bot", Needs: []string{"aiEnvelope.await"}}},
			},
			want: []string{"acme.bot", wop.FamilyAIEnvelope},
		},
		{
			name: "chain collapses when its root is missing",
			families: map[string][]Family{
				"a": {{Name: "acme.one", Needs: []string{"acme.missing"}}},
				"b": {{Name: "acme.two", Needs: []string{"acme.one"}}},
				"c": {{Name: "acme.three", Needs: []string{"acme.two"}}},
				"d": {{Name: "acme.free"}},
			},
			want: []string{"acme.free"},
		},
		{
			name: "mutual needs are both served",
			families: map[string][]Family{
				"a": {{Name: "acme.one", Needs: []string{"acme.two"}}},
				"b": {{Name: "acme.two", Needs: []string{"acme.one"}}},
			},
			want: []string{"acme.one", "acme.two"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRegistry(t)
			names := make([]string, 0, len(tt.families))
			for n := range tt.families {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				serve(r, n, tt.families[n]...)
			}
			var got []string
			for f := range r.Advertised() {
				got = append(got, f)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("advertised %v, want %v\ndocument %s", got, tt.want, r.Document())
			}
		})
	}
}

func TestAgentRuntimeImpliesAgentsManifestRuntime(t *testing.T) {
	runtime := Family{Name: wop.FamilyAgentRuntime, Methods: []string{"run"}}
	tests := []struct {
		name   string
		agents *Family
		want   bool
	}{
		{name: "without agents", agents: nil, want: false},
		{name: "agents without manifestRuntime", agents: &Family{Name: wop.FamilyAgents, Facets: facets("other", `{}`)}, want: false},
		{name: "agents with manifestRuntime", agents: &Family{Name: wop.FamilyAgents, Facets: facets("manifestRuntime", `{}`)}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRegistry(t)
			serve(r, "runtime", runtime)
			if tt.agents != nil {
				serve(r, "agents", *tt.agents)
			}
			if got := r.Has(wop.FamilyAgentRuntime, ""); got != tt.want {
				t.Fatalf("Has(agentRuntime) = %v, want %v; document %s", got, tt.want, r.Document())
			}
			if tt.agents != nil && !r.Has(wop.FamilyAgents, "") {
				t.Fatal("agents itself is not advertised")
			}
		})
	}

	// The exact document once both are advertised: agentRuntime sits
	// before agents in contract order.
	r := newTestRegistry(t)
	serve(r, "agents", Family{Name: wop.FamilyAgents, Facets: facets("manifestRuntime", `{}`)})
	serve(r, "runtime", runtime)
	assertDoc(t, r, docHead+
		`,"agentRuntime":{"status":"experimental","since":"2.0"}`+
		`,"agents":{"status":"experimental","since":"2.0","manifestRuntime":{}}}`)

	// Losing agents withdraws agentRuntime too.
	r.Stop("agents")
	assertDoc(t, r, docHead+`}`)
}

func TestFailAndCrashWithdraw(t *testing.T) {
	r := newTestRegistry(t)
	serve(r, "ai", Family{Name: wop.FamilyAIEnvelope, Facets: facets("await", `{}`)})
	serve(r, "kv", Family{Name: "acme.kv"})
	both := docHead + `,"aiEnvelope":{"status":"experimental","since":"2.0","await":{}}` +
		`,"extensions":{"acme.kv":{"status":"experimental","since":"2.0"}}}`
	assertDoc(t, r, both)

	r.Fail("ai", StateConfigured, errors.New("bad config"))
	assertDoc(t, r, docHead+`,"extensions":{"acme.kv":{"status":"experimental","since":"2.0"}}}`)
	if r.Has(wop.FamilyAIEnvelope, "") || r.Has(wop.FamilyAIEnvelope, "await") {
		t.Fatal("aiEnvelope still advertised after Fail")
	}

	r.Crash("kv", errors.New("exit status 2"))
	assertDoc(t, r, docHead+`}`)
	if _, _, ok := r.Lookup("acme.kv"); ok {
		t.Fatal("Lookup found a crashed family")
	}

	// A crashed capability keeps its families and comes back when ready.
	r.Restarting("kv")
	assertDoc(t, r, docHead+`}`)
	r.Ready("kv", []Family{{Name: "acme.kv"}}, &fakeInvoker{name: "kv2"})
	assertDoc(t, r, docHead+`,"extensions":{"acme.kv":{"status":"experimental","since":"2.0"}}}`)
	inv, _, ok := r.Lookup("acme.kv")
	if !ok || inv.(*fakeInvoker).name != "kv2" {
		t.Fatalf("Lookup after restart = %v, %v; want the new invoker", inv, ok)
	}
}

// A waiting capability is withdrawn with its reason and no failed phase,
// and served again once ready, without a restart counted.
func TestWaitWithdrawsUntilReady(t *testing.T) {
	r := newTestRegistry(t)
	serve(r, "prompts", Family{Name: wop.FamilyPromptLibrary})
	r.Wait("prompts", errors.New("database unreachable"))
	assertDoc(t, r, docHead+`}`)
	rec, _ := r.Record("prompts")
	if rec.State != StateWaiting || rec.FailedPhase != "" || rec.LastError != "database unreachable" || rec.Restarts != 0 {
		t.Fatalf("record while waiting = %+v", rec)
	}
	r.Ready("prompts", []Family{{Name: wop.FamilyPromptLibrary}}, &fakeInvoker{name: "prompts"})
	if !r.Has(wop.FamilyPromptLibrary, "") {
		t.Fatal("promptLibrary not advertised once ready again")
	}
}

func TestNonReadyStatesWithdraw(t *testing.T) {
	for _, s := range []State{StateDeclared, StateVerified, StateStarted, StateNegotiated, StateDescribed, StateConfigured, StateStopped} {
		t.Run(string(s), func(t *testing.T) {
			r := newTestRegistry(t)
			serve(r, "kv", Family{Name: "acme.kv"})
			r.Advance("kv", s)
			assertDoc(t, r, docHead+`}`)
			// Advancing back to ready without a new invoker serves nothing.
			r.Advance("kv", StateReady)
			assertDoc(t, r, docHead+`}`)
		})
	}
	t.Run("stop", func(t *testing.T) {
		r := newTestRegistry(t)
		serve(r, "kv", Family{Name: "acme.kv"})
		r.Stop("kv")
		assertDoc(t, r, docHead+`}`)
		if got := r.Records()[0].State; got != StateStopped {
			t.Fatalf("state = %q, want stopped", got)
		}
	})
}

func TestRecords(t *testing.T) {
	r := newTestRegistry(t)
	r.Declare("zeta", "/bin/zeta")
	r.Declare("alpha", "/bin/alpha")
	r.Declare("mid", "/bin/mid")
	r.Declare("zeta", "/bin/zeta2") // re-declaring keeps the position

	r.Describe("alpha", "wophost-alpha", "0.1.0", []string{"acme.kv", "acme.blob"})
	r.Ready("alpha", []Family{{Name: "acme.kv"}, {Name: "acme.blob", Needs: []string{"acme.missing"}}}, &fakeInvoker{})
	r.Describe("mid", "wophost-mid", "1.0.0", []string{"mcp"})
	r.Fail("mid", StateConfigured, errors.New("refused config"))
	r.Crash("zeta", errors.New("signal: killed"))
	for range 3 {
		r.Restarting("zeta")
	}
	r.Advance("unknown", StateReady) // updates of an undeclared capability are ignored

	recs := r.Records()
	if got := []string{recs[0].Name, recs[1].Name, recs[2].Name}; !slices.Equal(got, []string{"zeta", "alpha", "mid"}) || len(recs) != 3 {
		t.Fatalf("record order = %v (%d records), want declaration order", got, len(recs))
	}

	zeta := recs[0]
	if zeta.Plugin != "/bin/zeta2" || zeta.State != StateRestarting || zeta.Restarts != 3 ||
		zeta.LastError != "signal: killed" || zeta.FailedPhase != "" || zeta.Advertised != nil {
		t.Errorf("zeta record = %+v", zeta)
	}

	alpha := recs[1]
	if alpha.State != StateReady || alpha.PluginName != "wophost-alpha" || alpha.PluginVersion != "0.1.0" ||
		!slices.Equal(alpha.Families, []string{"acme.kv", "acme.blob"}) ||
		!slices.Equal(alpha.Advertised, []string{"acme.kv"}) || alpha.LastError != "" || alpha.FailedPhase != "" {
		t.Errorf("alpha record = %+v", alpha)
	}

	mid := recs[2]
	if mid.State != StateFailed || mid.FailedPhase != StateConfigured || mid.LastError != "refused config" ||
		mid.Advertised != nil || !slices.Equal(mid.Families, []string{"mcp"}) {
		t.Errorf("mid record = %+v", mid)
	}

	// Every change stamps the record with the registry clock.
	if !alpha.Changed.After(zeta.Changed) && !zeta.Changed.After(alpha.Changed) {
		t.Errorf("Changed not stamped: zeta %v alpha %v", zeta.Changed, alpha.Changed)
	}
	for _, rec := range recs {
		if rec.Changed.IsZero() {
			t.Errorf("%s: Changed is zero", rec.Name)
		}
	}

	// Ready after a failure clears the failed phase.
	r.Ready("mid", []Family{{Name: wop.FamilyMCP}}, &fakeInvoker{})
	mid = r.Records()[2]
	if mid.State != StateReady || mid.FailedPhase != "" || !slices.Equal(mid.Advertised, []string{wop.FamilyMCP}) {
		t.Errorf("mid after Ready = %+v", mid)
	}

	// A nil error leaves the previous message.
	r.Fail("mid", StateStarted, nil)
	if got := r.Records()[2]; got.LastError != "refused config" || got.FailedPhase != StateStarted {
		t.Errorf("mid after Fail(nil) = %+v", got)
	}
}

func TestRecordJSON(t *testing.T) {
	rec := Record{Name: "kv", Plugin: "/bin/kv", State: StateReady, Changed: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	got, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"kv","plugin":"/bin/kv","state":"ready","restarts":0,"changed":"2026-01-02T03:04:05Z"}`
	if string(got) != want {
		t.Fatalf("record JSON:\n got %s\nwant %s", got, want)
	}
}

func TestDocumentStable(t *testing.T) {
	build := func() *Registry {
		r := newTestRegistry(t)
		serve(r, "ai", Family{Name: wop.FamilyAIEnvelope, Facets: facets(
			"await", `{"z":1,"y":2,"x":3,"w":{"d":1,"c":2,"b":3,"a":4}}`,
			"tools", `{}`, "models", `["m1"]`, "stream", `true`,
		)})
		serve(r, "kv", Family{Name: "acme.kv"}, Family{Name: "zeta.kv"}, Family{Name: "beta.kv"}, Family{Name: "mid.kv"})
		serve(r, "mcp", Family{Name: wop.FamilyMCP, Facets: facets("client", `{}`, "server", `{}`)})
		r.Declare("idle", "plugin-idle")
		return r
	}
	r := build()
	first := r.Document()
	// Changes that do not touch what is served leave the bytes alone.
	for i := range 20 {
		r.Advance("idle", StateStarted)
		r.Describe("idle", "idle", "1", nil)
		r.Restarting("idle")
		if got := r.Document(); !bytes.Equal(got, first) {
			t.Fatalf("document changed on recompute %d:\n got %s\nwant %s", i, got, first)
		}
	}
	// So does building the same registry again (map order differs).
	for i := range 20 {
		if got := build().Document(); !bytes.Equal(got, first) {
			t.Fatalf("document differs on rebuild %d:\n got %s\nwant %s", i, got, first)
		}
	}
}

func TestHas(t *testing.T) {
	r := newTestRegistry(t)
	serve(r, "ai", Family{Name: wop.FamilyAIEnvelope, Facets: facets("await", `{}`)})
	serve(r, "kv", Family{Name: "acme.kv", Facets: facets("watch", `{"max":1}`)})
	tests := []struct {
		family, facet string
		want          bool
	}{
		{wop.FamilyAIEnvelope, "", true},
		{wop.FamilyAIEnvelope, "await", true},
		{wop.FamilyAIEnvelope, "tools", false},
		{"acme.kv", "", true},
		{"acme.kv", "watch", true},
		{"acme.kv", "list", false},
		{wop.FamilyMCP, "", false},
		{wop.FamilyMCP, "client", false},
		{"acme", "", false},
	}
	for _, tt := range tests {
		if got := r.Has(tt.family, tt.facet); got != tt.want {
			t.Errorf("Has(%q, %q) = %v, want %v", tt.family, tt.facet, got, tt.want)
		}
	}
}

func TestLookupAndAdvertised(t *testing.T) {
	r := newTestRegistry(t)
	aiInv := serve(r, "ai", Family{Name: wop.FamilyAIEnvelope, Methods: []string{"generate"}, Facets: facets("await", `{"a":1}`)})
	kvInv := serve(r, "kv", Family{Name: "acme.kv", Methods: []string{"get", "put"}})

	inv, fam, ok := r.Lookup(wop.FamilyAIEnvelope)
	if !ok || inv != aiInv || !slices.Equal(fam.Methods, []string{"generate"}) {
		t.Fatalf("Lookup(aiEnvelope) = %v, %+v, %v", inv, fam, ok)
	}
	if inv, _, ok := r.Lookup("acme.kv"); !ok || inv != kvInv {
		t.Fatalf("Lookup(acme.kv) = %v, %v", inv, ok)
	}
	if inv, fam, ok := r.Lookup("acme.none"); ok || inv != nil || !reflect.DeepEqual(fam, Family{}) {
		t.Fatalf("Lookup(acme.none) = %v, %+v, %v", inv, fam, ok)
	}
	adv := r.Advertised()
	if len(adv) != 2 || string(adv[wop.FamilyAIEnvelope]["await"]) != `{"a":1}` {
		t.Fatalf("Advertised() = %v", adv)
	}
	if _, ok := adv["acme.kv"]; !ok {
		t.Fatalf("Advertised() lacks acme.kv: %v", adv)
	}
}

// The facets a node run hands its pack follow the advertisement: a
// family's own object while it is advertised, gone once it is not, and
// the map a caller holds is never changed under it.
func TestAdvertisedFacetsFollowTheAdvertisement(t *testing.T) {
	r := newTestRegistry(t)
	serve(r, "ai", Family{Name: wop.FamilyAIEnvelope, Facets: facets("await", `{"max":2}`, "streaming", `true`)})
	serve(r, "kv", Family{Name: "acme.kv"})
	held := r.AdvertisedFacets()
	want := map[string]string{wop.FamilyAIEnvelope: `{"await":{"max":2},"streaming":true}`, "acme.kv": `{}`}
	if len(held) != len(want) {
		t.Fatalf("facets of %d families, want %d: %q", len(held), len(want), held)
	}
	for fam, w := range want {
		if string(held[fam]) != w {
			t.Errorf("%s: %s, want %s", fam, held[fam], w)
		}
	}
	r.Fail("ai", StateConfigured, errors.New("bad config"))
	if got := r.AdvertisedFacets(); len(got) != 1 || got[wop.FamilyAIEnvelope] != nil {
		t.Errorf("after aiEnvelope's failure: %q, want acme.kv's alone", got)
	}
	if string(held[wop.FamilyAIEnvelope]) != want[wop.FamilyAIEnvelope] {
		t.Errorf("the map held before the change became %q", held)
	}
}
