package integration

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type envelope struct {
	Code       string          `json:"code"`
	Message    string          `json:"message"`
	Capability string          `json:"capability"`
	Retryable  bool            `json:"retryable"`
	Details    json.RawMessage `json:"details"`
}

func decodeEnvelope(t *testing.T, res result) envelope {
	t.Helper()
	if res.code != 1 {
		t.Fatalf("exit %d, want 1 (failure)\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var e envelope
	if err := json.Unmarshal([]byte(res.stdout), &e); err != nil {
		t.Fatalf("stdout is not an error envelope: %v\n%s", err, res.stdout)
	}
	return e
}

func probeConfig(t *testing.T, extra string) string {
	t.Helper()
	return writeConfig(t, `
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "other" {
  plugin   = "testcap"
  families = ["test.other"]
}
pack "private.wophost.probe" { path = "`+probePack(t)+`" }
`+extra)
}

func TestNodeRequiringUnadvertisedFamilyIsRefusedBeforeItRuns(t *testing.T) {
	cfg := probeConfig(t, "")
	marker := filepath.Join(t.TempDir(), "ran")
	res := runHost(t, `{"marker":"`+marker+`"}`, "--config", cfg, "run", "probe.needsai", "--input", "-")
	e := decodeEnvelope(t, res)
	if e.Code != "capability_not_provided" || e.Capability != "host.aiEnvelope" {
		t.Errorf("got %+v, want capability_not_provided for host.aiEnvelope", e)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node code ran although refused (marker: %v)", err)
	}
}

func TestPeerDependencies(t *testing.T) {
	needsAI := filepath.Join(t.TempDir(), "needsai")
	if err := os.MkdirAll(needsAI, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"name":"private.test.needsai","version":"1.0.0","kind":"node","engines":{"openwop":">=2.0 <3.0.0"},"runtime":{"language":"go","entry":"absent"},
"peerDependencies":{"aiEnvelope":"required","test.echo":"required"},
"peerDependenciesMeta":{"aiEnvelope":{"facets":["await"]}},
"nodes":[{"typeId":"needsai.x","version":"1.0.0","category":"chat","role":"pure"}]}`
	if err := os.WriteFile(filepath.Join(needsAI, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := probeConfig(t, `pack "private.test.needsai" { path = "`+needsAI+`" }`)
	res := runHost(t, "", "--config", cfg, "--json", "packs")
	if res.code != 0 {
		t.Fatalf("host packs: exit %d\n%s", res.code, res.stderr)
	}
	var packs []struct {
		Name, State, Error string
		Degraded           []string
	}
	if err := json.Unmarshal([]byte(res.stdout), &packs); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for i, p := range packs {
		got[p.Name] = i
	}
	probe, needs := packs[got["private.wophost.probe"]], packs[got["private.test.needsai"]]
	if want := "agentRuntime,aiEnvelope,mcp,promptLibrary"; probe.State != "degraded" || strings.Join(probe.Degraded, ",") != want {
		t.Errorf("private.wophost.probe: %+v, want degraded for the optional %s", probe, want)
	}
	if needs.State != "refused" || !strings.Contains(needs.Error, "pack_peer_dependency_missing") ||
		!strings.Contains(needs.Error, "aiEnvelope, aiEnvelope.await") {
		t.Errorf("private.test.needsai: %+v, want refused with pack_peer_dependency_missing naming aiEnvelope and aiEnvelope.await", needs)
	}
	// A refused pack's nodes are unknown to the host.
	e := decodeEnvelope(t, runHost(t, "", "--config", cfg, "run", "needsai.x"))
	if e.Code != "not_found" {
		t.Errorf("running a refused pack's node: %+v, want not_found", e)
	}
}

func TestUndeclaredCallIsRefused(t *testing.T) {
	cfg := probeConfig(t, "")
	// test.other is advertised, but the probe pack does not declare it.
	res := runHost(t, `{"family":"test.other","method":"echo"}`, "--config", cfg, "run", "probe.call", "--input", "-")
	e := decodeEnvelope(t, res)
	if e.Code != "capability_not_declared" || e.Capability != "host.test.other.echo" {
		t.Errorf("got %+v, want capability_not_declared for host.test.other.echo", e)
	}
	// A vendor family the host does not serve either: still not declared,
	// so a pack cannot probe what the host serves.
	res = runHost(t, `{"family":"acme.unserved","method":"get"}`, "--config", cfg, "run", "probe.call", "--input", "-")
	if e := decodeEnvelope(t, res); e.Code != "capability_not_declared" || e.Capability != "host.acme.unserved.get" {
		t.Errorf("got %+v, want capability_not_declared for host.acme.unserved.get", e)
	}
	// A declared family the host does not serve is not provided.
	res = runHost(t, `{"family":"aiEnvelope","method":"generate","payload":{}}`, "--config", cfg, "run", "probe.call", "--input", "-")
	if e := decodeEnvelope(t, res); e.Code != "capability_not_provided" {
		t.Errorf("got %+v, want capability_not_provided for the declared, unserved aiEnvelope", e)
	}
	// The same call is fine for the declared family.
	ok := runHost(t, `{"family":"test.echo","method":"echo","payload":{"a":1}}`, "--config", cfg, "run", "probe.call", "--input", "-")
	if ok.code != 0 || !strings.Contains(ok.stdout, `"a": 1`) {
		t.Errorf("declared call failed: exit %d\n%s\n%s", ok.code, ok.stdout, ok.stderr)
	}
}

func TestUnknownNodeAndInvalidInput(t *testing.T) {
	cfg := probeConfig(t, "")
	if e := decodeEnvelope(t, runHost(t, "", "--config", cfg, "run", "probe.nope")); e.Code != "not_found" {
		t.Errorf("unknown typeId: %+v", e)
	}
	e := decodeEnvelope(t, runHost(t, `{"count":0}`, "--config", cfg, "run", "probe.validated", "--input", "-"))
	if e.Code != "validation_error" || !strings.Contains(string(e.Details), `"/name"`) || !strings.Contains(string(e.Details), `"/count"`) {
		t.Errorf("invalid input: %+v, want validation_error naming /name and /count", e)
	}
}
