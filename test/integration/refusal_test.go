package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/test/testbin"
)

type envelope struct {
	Code       string          `json:"code"`
	Message    string          `json:"message"`
	Capability string          `json:"capability"`
	Retryable  bool            `json:"retryable"`
	Details    json.RawMessage `json:"details"`
}

// decodeEnvelope returns the ctx-level error of the failed run outcome
// `host run` printed: the node ran and failed.
func decodeEnvelope(t *testing.T, res result) envelope {
	t.Helper()
	if res.code != 1 {
		t.Fatalf("exit %d, want 1 (failure)\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var o struct {
		RunID  string    `json:"runId"`
		Status string    `json:"status"`
		Error  *envelope `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.RunID == "" || o.Status != "failed" || o.Error == nil || o.Error.Code == "" {
		t.Fatalf("stdout is not a failed run outcome (%v):\n%s", err, res.stdout)
	}
	return *o.Error
}

// decodeCallError returns the ctx-level envelope a failed `host call`
// printed: a ctx call's error, as a node would get it.
func decodeCallError(t *testing.T, res result) envelope {
	t.Helper()
	if res.code != 1 {
		t.Fatalf("exit %d, want 1 (failure)\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var e envelope
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Code == "" || e.Message == "" {
		t.Fatalf("stdout is not a ctx-level error envelope (%v):\n%s", err, res.stdout)
	}
	return e
}

// refusal is OpenWOP's HTTP error envelope, as `host serve` answers a
// refused request and `host run` prints one.
type refusal struct {
	Error   string         `json:"error"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// decodeRefusal returns the OpenWOP error envelope `host run` printed:
// the run was refused before the node ran.
func decodeRefusal(t *testing.T, res result) refusal {
	t.Helper()
	if res.code != 1 {
		t.Fatalf("exit %d, want 1 (failure)\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	return parseRefusal(t, []byte(res.stdout))
}

// parseRefusal checks that body is OpenWOP's closed error envelope and
// returns it.
func parseRefusal(t *testing.T, body []byte) refusal {
	t.Helper()
	var r refusal
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.Error == "" || r.Message == "" || r.Details == nil {
		t.Fatalf("not an OpenWOP error envelope {error, message, details} (%v):\n%s", err, body)
	}
	if _, ok := r.Details["retryable"].(bool); !ok {
		t.Fatalf("details without retryable:\n%s", body)
	}
	return r
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
pack "private.wophost.probe" {
  path = "`+probePack(t)+`"
  # The test has it write where the test looks, or start processes:
  # it runs uncontained (containment has its own tests).
  sandbox { enabled = false }
}
`+extra)
}

func TestNodeRequiringUnadvertisedFamilyIsRefusedBeforeItRuns(t *testing.T) {
	cfg := probeConfig(t, "")
	marker := filepath.Join(t.TempDir(), "ran")
	res := runHost(t, `{"marker":"`+marker+`"}`, "--config", cfg, "run", "probe.needsai", "--input", "-")
	// Refused at dispatch, before the node ran: OpenWOP's envelope.
	e := decodeRefusal(t, res)
	if e.Error != "capability_not_provided" || e.Details["capability"] != "host.aiEnvelope" {
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
	e := decodeRefusal(t, runHost(t, "", "--config", cfg, "run", "needsai.x"))
	if e.Error != "not_found" {
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
	if e := decodeRefusal(t, runHost(t, "", "--config", cfg, "run", "probe.nope")); e.Error != "not_found" {
		t.Errorf("unknown typeId: %+v", e)
	}
	e := decodeRefusal(t, runHost(t, `{"count":0}`, "--config", cfg, "run", "probe.validated", "--input", "-"))
	details, _ := json.Marshal(e.Details)
	if e.Error != "validation_error" || !strings.Contains(string(details), `"/name"`) || !strings.Contains(string(details), `"/count"`) {
		t.Errorf("invalid input: %+v, want validation_error naming /name and /count", e)
	}
}

// succeeded reports whether an answer of POST :execute is the outcome of
// a node that ran and succeeded: a node that ran and failed is a 200 too.
func succeeded(status int, body string) bool {
	var o struct {
		Status string `json:"status"`
	}
	return status == 200 && json.Unmarshal([]byte(body), &o) == nil && o.Status == "succeeded"
}

// validDiscovery checks doc against our restatement of OpenWOP's
// discovery rules, core/registry/testdata/openwop-discovery.schema.json.
func validDiscovery(t *testing.T, doc []byte) {
	t.Helper()
	schema, err := jsonschema.NewCompiler().Compile(testbin.SourceDir("core/registry/testdata/openwop-discovery.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	if err := schema.Validate(v); err != nil {
		t.Errorf("the discovery document breaks OpenWOP's rules: %v\n%s", err, doc)
	}
}

// ok reports whether the node ran and succeeded.
func (r executeReply) ok() bool { return r.status == 200 && r.Outcome == "succeeded" }

// decodeExecuteReply reads an answer of POST :execute by its shape: a
// 200 is a run outcome, anything else OpenWOP's error envelope.
func decodeExecuteReply(status int, data []byte) (executeReply, error) {
	out := executeReply{status: status, body: string(data)}
	if status == 200 {
		var o struct {
			RunID  string          `json:"runId"`
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
			Error  *struct {
				Code      string          `json:"code"`
				Message   string          `json:"message"`
				Retryable bool            `json:"retryable"`
				Details   json.RawMessage `json:"details"`
			} `json:"error"`
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil || o.RunID == "" || (o.Status == "succeeded") == (o.Error != nil) {
			return out, fmt.Errorf("not a run outcome: %s (%v)", data, err)
		}
		out.RunID, out.Outcome = o.RunID, o.Status
		if o.Status == "succeeded" {
			_ = json.Unmarshal(o.Output, &out.Output)
			return out, nil
		}
		out.Code, out.Message, out.Retryable = o.Error.Code, o.Error.Message, o.Error.Retryable
		_ = json.Unmarshal(o.Error.Details, &out.Details)
		return out, nil
	}
	var e struct {
		Error   string          `json:"error"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == "" || e.Message == "" {
		return out, fmt.Errorf("not an OpenWOP error envelope: %s (%v)", data, err)
	}
	var d struct {
		Retryable *bool `json:"retryable"`
	}
	if json.Unmarshal(e.Details, &d) != nil || d.Retryable == nil {
		return out, fmt.Errorf("error envelope without details.retryable: %s", data)
	}
	out.Code, out.Message, out.Retryable = e.Error, e.Message, *d.Retryable
	_ = json.Unmarshal(e.Details, &out.Details)
	return out, nil
}
