package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// testPlugin is the path of the binary built from internal/testplugin. TestMain
// sets it once, before any test runs.
var testPlugin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Getenv(kitChildEnv) != "" {
		// A child run of TestKitOnBadPlugin needs only the bad plugin,
		// which its parent built.
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "plugintest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testPlugin = filepath.Join(dir, "testplugin")
	if runtime.GOOS == "windows" {
		testPlugin += ".exe"
	}
	cmd := exec.Command("go", "build", "-o", testPlugin, "./internal/testplugin")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build test plugin: %v\n", err)
		return 1
	}
	return m.Run()
}

func TestRun(t *testing.T) {
	Run(t, Config{
		Binary: testPlugin,
		Config: json.RawMessage(`{"fail":false}`),
		Calls: []Call{
			{
				Family: "test.echo", Method: "echo", Payload: json.RawMessage(`{"a":1}`),
				Check: func(t testing.TB, res json.RawMessage) {
					if string(res) != `{"a":1}` {
						t.Errorf("echo returned %s; want {\"a\":1}", res)
					}
				},
			},
			{Family: "test.echo", Method: "sleep", Payload: json.RawMessage(`{"ms":1}`)},
			{
				Family: "test.echo", Method: "callback", Payload: json.RawMessage(`{"n":2}`),
				Check: func(t testing.TB, res json.RawMessage) {
					var got struct {
						Pong  json.RawMessage `json:"pong"`
						RunID string          `json:"runId"`
					}
					if err := json.Unmarshal(res, &got); err != nil {
						t.Fatalf("callback result %s: %v", res, err)
					}
					if string(got.Pong) != `{"n":2}` || got.RunID != "plugintest-run" {
						t.Errorf("callback returned %s; want the payload and the run id back from the host", res)
					}
				},
			},
		},
		HostServices: func(_ context.Context, family, method string, payload []byte, call wop.CallContext) ([]byte, error) {
			if family != "test.host" || method != "ping" {
				return nil, wop.NotProvided("host." + family + "." + method)
			}
			return json.Marshal(map[string]any{"pong": json.RawMessage(payload), "runId": call.RunID})
		},
	})
}

func TestPluginHandle(t *testing.T) {
	p := Start(t, Config{Binary: testPlugin})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	invokeEcho := func(method, payload string, call wop.CallContext) (json.RawMessage, error) {
		return p.Invoke(ctx, "test.echo", method, json.RawMessage(payload), call)
	}

	if _, err := invokeEcho("echo", `{}`, wop.CallContext{}); wop.CodeOf(err) != wop.CodeUnavailable {
		t.Errorf("Invoke before Configure: got %v; want code %s", err, wop.CodeUnavailable)
	}

	res, err := p.ConfigureErr(ctx, json.RawMessage(`{"fail":true}`))
	if err != nil {
		t.Fatalf("ConfigureErr: %v", err)
	}
	if len(res.Diagnostics) != 1 || !slices.Equal(res.Diagnostics[0].Path, []string{"fail"}) {
		t.Errorf("ConfigureErr with fail=true: diagnostics %v; want one at [fail]", res.Diagnostics)
	}

	facets := p.Configure(t, nil)
	if got := string(facets["test.echo"]["echo"]); got != "{}" {
		t.Errorf("facet test.echo.echo = %q; want {}", got)
	}

	_, err = invokeEcho("nope", `{}`, wop.CallContext{})
	var we *wop.Error
	if !errors.As(err, &we) || we.Code != wop.CodeNotFound || we.Capability != "host.test.echo.nope" {
		t.Errorf("unknown method: got %#v; want a *wop.Error with code %s naming host.test.echo.nope", err, wop.CodeNotFound)
	}
	if _, err := p.Invoke(ctx, "test.nope", "echo", json.RawMessage(`{}`), wop.CallContext{}); wop.CodeOf(err) != wop.CodeNotFound {
		t.Errorf("unknown family: got %v; want code %s", err, wop.CodeNotFound)
	}
	if _, err := invokeEcho("echo", `{`, wop.CallContext{}); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("malformed payload: got %v; want code %s", err, wop.CodeValidation)
	}
	// No HostServices in the config: the default refuses the callback.
	if _, err := invokeEcho("callback", `{}`, wop.CallContext{}); wop.CodeOf(err) != wop.CodeCapabilityNotProvided {
		t.Errorf("callback without host services: got %v; want code %s", err, wop.CodeCapabilityNotProvided)
	}
	// Only the call context carries the short deadline, so this proves it
	// reaches the handler; the gRPC deadline is the test's generous one.
	call := wop.CallContext{Deadline: time.Now().Add(50 * time.Millisecond)}
	if _, err := invokeEcho("sleep", `{"ms":600000}`, call); wop.CodeOf(err) != wop.CodeDeadlineExceeded {
		t.Errorf("sleep past the call deadline: got %v; want code %s", err, wop.CodeDeadlineExceeded)
	}
	if out, err := invokeEcho("echo", `[1]`, wop.CallContext{}); err != nil || string(out) != "[1]" {
		t.Errorf("echo after errors: got %s, %v; want [1]", out, err)
	}
	if p.Exited() {
		t.Error("plugin exited")
	}
}

// TestCatchesBadPlugin runs the checks Run makes on a plugin that
// describes itself wrongly.
func TestCatchesBadPlugin(t *testing.T) {
	p := Start(t, Config{Binary: testPlugin, Env: []string{"PLUGINTEST_MODE=bad"}})
	assertProblems(t, descriptionProblems(p.Describe(t)),
		"version is empty", `family "Test_Echo" is not a core family`)
	assertProblems(t, schemaProblems(p.ConfigSchema(t), ""),
		`name "a" is used more than once`, `attribute "a" has no type`, `nesting "set"`)
}

func TestDescriptionProblems(t *testing.T) {
	good := func() *Description {
		return &Description{Name: "p", Version: "1", Families: []FamilyDescription{
			{Name: wop.FamilyMCP, Status: "stable", Since: "2.0", Witness: "seam-gated", Methods: []string{"callTool"}},
			{Name: "acme.kv", Status: "experimental", Since: "2.0", Until: "2030-01-01", Witness: "claims-check", Methods: []string{"get", "put"}},
		}}
	}
	if pr := descriptionProblems(good()); len(pr) != 0 {
		t.Fatalf("good description: %q", pr)
	}
	tests := []struct {
		name  string
		spoil func(d *Description)
		want  string
	}{
		{"no name", func(d *Description) { d.Name = "" }, "name is empty"},
		{"no families", func(d *Description) { d.Families = nil }, "no families"},
		{"reserved org", func(d *Description) { d.Families[1].Name = "openwop.kv" }, "reserved"},
		{"twice", func(d *Description) { d.Families[1].Name = wop.FamilyMCP }, "listed more than once"},
		{"no until", func(d *Description) { d.Families[0].Status = "deprecated" }, "until: required"},
		{"status", func(d *Description) { d.Families[0].Status = "beta" }, `status "beta"`},
		{"stable with until", func(d *Description) { d.Families[0].Until = "3.0" }, "a stable family has no until"},
		{"no witness", func(d *Description) { d.Families[1].Witness = "" }, `witness ""`},
		{"since", func(d *Description) { d.Families[1].Since = "2" }, `since "2"`},
		{"no methods", func(d *Description) { d.Families[1].Methods = nil }, "lists no methods"},
		{"duplicate method", func(d *Description) { d.Families[1].Methods = []string{"get", "get"} }, "method get more than once"},
		{"empty method", func(d *Description) { d.Families[1].Methods = []string{""} }, "empty method name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := good()
			tc.spoil(d)
			assertProblems(t, descriptionProblems(d), tc.want)
		})
	}
}

func TestSchemaProblems(t *testing.T) {
	b := schema.Block{Blocks: []schema.NestedBlock{{
		TypeName: "provider", Nesting: schema.NestingMap,
		Block: schema.Block{
			Attributes: []schema.Attribute{{Name: "key", Type: schema.String}, {Name: "", Type: schema.String}},
			Blocks:     []schema.NestedBlock{{TypeName: "key", Nesting: schema.NestingSingle}},
		},
	}}}
	assertProblems(t, schemaProblems(b, ""), "block provider: attribute 1 has no name", `block provider: name "key" is used more than once`)
}

func TestFacetProblems(t *testing.T) {
	d := &Description{Families: []FamilyDescription{{Name: "acme.a"}}}
	assertProblems(t, facetProblems(d, map[string]map[string]json.RawMessage{"acme.b": {}}),
		"no facets for family acme.a", "facets for family acme.b, which Describe does not list")
	d = &Description{Families: []FamilyDescription{{Name: "aiEnvelope"}, {Name: "acme.a"}}}
	assertProblems(t, facetProblems(d, map[string]map[string]json.RawMessage{"aiEnvelope": {"await": json.RawMessage(`{}`)}, "acme.a": {"x": json.RawMessage(`{}`)}}),
		`Configure returned facets for family aiEnvelope that make an invalid record, which a host refuses to advertise: facet "await": must be the boolean true`)
	if pr := facetProblems(d, map[string]map[string]json.RawMessage{"aiEnvelope": {"await": json.RawMessage(`true`)}, "acme.a": {"x": json.RawMessage(`{}`)}}); len(pr) != 0 {
		t.Errorf("valid facets: %q", pr)
	}
}

// assertProblems fails t unless every wanted text is part of some problem.
func assertProblems(t *testing.T, problems []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem mentions %q; got %q", w, problems)
		}
	}
}

// The kit gives each run a token, as the host does, and its host services
// refuse a callback that names the run without it: a plugin whose
// callbacks leave out the call context it was invoked with fails the kit
// as it would fail the host. A token the test passes becomes the run's.
func TestCallbacksMustCarryTheRunToken(t *testing.T) {
	var mu sync.Mutex
	var seen []wop.RunToken
	p := Start(t, Config{Binary: testPlugin, HostServices: func(_ context.Context, _, _ string, payload []byte, call wop.CallContext) ([]byte, error) {
		mu.Lock()
		seen = append(seen, call.Token)
		mu.Unlock()
		return payload, nil
	}})
	p.Configure(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	call := wop.CallContext{RunID: "plugintest-run", Depth: 1}
	if _, err := p.Invoke(ctx, "test.echo", "callback", json.RawMessage(`{}`), call); err != nil {
		t.Fatalf("callback through req.Host with the handler's ctx: %v", err)
	}
	_, err := p.Invoke(ctx, "test.echo", "callbackDetached", json.RawMessage(`{}`), call)
	if we := wop.AsError(err); we == nil || we.Code != wop.CodeCapabilityNotDeclared || !strings.Contains(we.Message, "carries no run token") {
		t.Fatalf("callback without the run token: %v; want capability_not_declared", err)
	}
	mine := wop.NewRunToken("chosen-by-the-test")
	if _, err := p.Invoke(ctx, "test.echo", "callback", json.RawMessage(`{}`), wop.CallContext{RunID: "other-run", Depth: 1, Token: mine}); err != nil {
		t.Fatalf("callback with the test's own token: %v", err)
	}
	// A callback without a run id is the test's to answer.
	if _, err := p.Invoke(ctx, "test.echo", "callbackDetached", json.RawMessage(`{}`), wop.CallContext{}); err != nil {
		t.Fatalf("callback outside any run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || seen[0].IsZero() || !seen[1].Matches(mine) || !seen[2].IsZero() {
		t.Errorf("the test's host services saw tokens %v; want the kit's, the test's, then none", seen)
	}
}

func TestCheckWantCode(t *testing.T) {
	for _, tc := range []struct {
		family, code string
		ok           bool
	}{
		{"acme.kv", "acme.key_not_found", true},
		{"acme.kv", wop.CodeNotFound, true},
		{"acme.kv", "acme.kv.key_not_found", false},
		{"acme.kv", "other.key_not_found", false},
		{"acme.kv", "key_not_found", false},
		{wop.FamilyAIEnvelope, "provider_rate_limited", true},
		{wop.FamilyAIEnvelope, "wophost.thing", true},
		{wop.FamilyAIEnvelope, "a.b.c", false},
	} {
		if why := checkWantCode(tc.family, tc.code); (why == "") != tc.ok {
			t.Errorf("checkWantCode(%s, %s) = %q, want ok %v", tc.family, tc.code, why, tc.ok)
		}
	}
}
