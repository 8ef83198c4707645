package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// nopInvoker stands in for a plugin: the manifest never calls one.
type nopInvoker struct{}

func (nopInvoker) Invoke(context.Context, string, string, []byte, wop.CallContext) ([]byte, error) {
	return nil, nil
}

// GET /host/effect-seams serves the current host's manifest behind the
// bearer token: the side-effecting methods of what it advertises, not its
// pure ones.
func TestEffectSeamsRoute(t *testing.T) {
	f := newFake()
	f.reg = registry.New(registry.Implementation{Name: "wophost", Version: "9.9.9"})
	f.reg.Declare("kv", "wophost-kv")
	f.reg.Ready("kv", []registry.Family{{Name: "acme.kv", Methods: []string{"get", "put"}, Pure: []string{"get"}}}, nopInvoker{})
	s := New(NewCurrent(f), Options{Tokens: []string{"secret"}})

	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/host/effect-seams", nil))
	if w.Code != 401 {
		t.Fatalf("without a token: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/host/effect-seams", nil)
	r.Header.Set("Authorization", "Bearer secret")
	s.ServeHTTP(w, r)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var m host.EffectManifest
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m.ManifestVersion != "1" || m.Host.Build != "9.9.9" || len(m.Seams) != 1 || m.Seams[0].Seam != "acme.kv.put" ||
		m.Seams[0].Kind != host.SeamKindOther || !m.Seams[0].Guarded || !m.Seams[0].BranchReFires {
		t.Fatalf("manifest %s", w.Body)
	}

	w = httptest.NewRecorder()
	New(NewCurrent(nil), Options{}).ServeHTTP(w, httptest.NewRequest("GET", "/host/effect-seams", nil))
	if e := envelope(t, w); w.Code != 503 || e.Error != "runner_unavailable" {
		t.Fatalf("no host: %d %s", w.Code, w.Body)
	}
}
