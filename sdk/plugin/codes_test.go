package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/wophost/wophost/sdk/internal/wire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
	"github.com/wophost/wophost/sdk/wop"
)

func kvFamily(codes ...string) *Family {
	return &Family{
		Name: "acme.kv", Status: "experimental", Since: "2.0", Until: "2027-06-30", Witness: "claims-check",
		Methods: map[string]Handler{"get": func(context.Context, *Request) (any, error) { return nil, nil }},
		Codes:   codes,
	}
}

func TestValidateDeclaredCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		family *Family
		want   string // "" when valid
	}{
		{"one-dot codes of the family's org", kvFamily("acme.key_not_found", "acme.value_too_large"), ""},
		{"two dots", kvFamily("acme.kv.key_not_found"), `family "acme.kv" declares the error code "acme.kv.key_not_found": a vendor error code is "org.name" with exactly one dot`},
		{"no dot", kvFamily("key_not_found"), `"key_not_found"`},
		{"upper case", kvFamily("acme.KeyNotFound"), `"acme.KeyNotFound"`},
		{"reserved org", kvFamily("openwop.x"), `"openwop.x"`},
		{"another org", kvFamily("other.key_not_found"), `family "acme.kv" declares the error code "other.key_not_found": its org must be the family's, "acme"`},
		{"a core family may use any org", &Family{Name: "mcp", Status: "stable", Since: "2.0", Witness: "seam-gated",
			Methods: map[string]Handler{"m": nil}, Codes: []string{"wophost.server_gone"}}, ""},
		{"a record OpenWOP refuses", &Family{Name: "acme.kv", Status: "experimental", Since: "2.0", Witness: "claims-check",
			Methods: map[string]Handler{"m": nil}}, `family "acme.kv": until`},
	} {
		err := (&Plugin{Name: "p", Families: []*Family{tc.family}}).Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// envServeBadPlugin makes the test binary a plugin that declares a
// malformed code and calls Serve.
const envServeBadPlugin = "WOPHOST_TEST_SERVE_BAD_CODE"

func TestMain(m *testing.M) {
	if os.Getenv(envServeBadPlugin) != "" {
		Serve(&Plugin{Name: "bad", Version: "1.0.0", Families: []*Family{kvFamily("acme.kv.key_not_found")}})
		os.Exit(0) // not reached: Serve exits
	}
	os.Exit(m.Run())
}

// Serve refuses a plugin declaring a malformed code before the handshake:
// non-zero exit, the family and the code named on stderr, nothing on
// stdout (where the handshake would be).
func TestServeRefusesMalformedCode(t *testing.T) {
	// A Serve that got past the check would wait for a host: the
	// deadline turns that into a failure rather than a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServeBadPlugin+"=1", goplugin.HandshakeConfig(wire.Handshake).MagicCookieKey+"="+wire.Handshake.MagicCookieValue)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("Serve did not exit non-zero: %v\nstderr: %s", err, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q: the handshake was written", stdout.String())
	}
	if !strings.Contains(stderr.String(), `family "acme.kv" declares the error code "acme.kv.key_not_found"`) {
		t.Errorf("stderr %q does not name the family and the code", stderr.String())
	}
}

// A handler error with a code its family does not declare reaches the
// host as internal, with the original code in details; declared codes,
// core codes and (for a core family) contract family codes pass.
func TestUndeclaredCodesBecomeInternal(t *testing.T) {
	returning := func(code string) Handler {
		return func(context.Context, *Request) (any, error) { return nil, wop.Errorf(code, "failed") }
	}
	kv := kvFamily("acme.key_not_found")
	kv.Methods = map[string]Handler{
		"declared": returning("acme.key_not_found"), "core": returning(wop.CodeNotFound),
		"malformed": returning("acme.kv.key_not_found"), "undeclared": returning("acme.other"),
		"family": returning("prompt_not_found"),
	}
	ai := &Family{Name: "aiEnvelope", Status: "stable", Since: "2.0", Witness: "witnessable-gated",
		Methods: map[string]Handler{"generate": returning("provider_rate_limited"), "dotted": returning("acme.kv.x")}}
	var logs bytes.Buffer
	p := &Plugin{Name: "codes", Version: "1.0.0", Families: []*Family{kv, ai}}
	conn := inProcess(t, p, hclog.New(&hclog.LoggerOptions{Output: &logs}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Client.Configure(ctx, &wophostv1.ConfigureRequest{Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ family, method, want string }{
		{"acme.kv", "declared", "acme.key_not_found"},
		{"acme.kv", "core", wop.CodeNotFound},
		{"acme.kv", "malformed", wop.CodeInternal},
		{"acme.kv", "undeclared", wop.CodeInternal},
		{"acme.kv", "family", wop.CodeInternal},
		{"aiEnvelope", "generate", "provider_rate_limited"},
		{"aiEnvelope", "dotted", wop.CodeInternal},
	} {
		_, err := conn.Client.Invoke(ctx, &wophostv1.InvokeRequest{Family: tc.family, Method: tc.method, Payload: []byte(`{}`),
			Call: wire.CallContextToProto(wop.CallContext{RunID: "r", NodeID: "n", Deadline: time.Now().Add(time.Minute)})})
		we := wire.FromStatus(err)
		if we == nil || we.Code != tc.want {
			t.Errorf("%s.%s: %v, want %s", tc.family, tc.method, err, tc.want)
			continue
		}
		if tc.want == wop.CodeInternal {
			var d struct {
				Code string `json:"code"`
			}
			if json.Unmarshal(we.Details, &d) != nil || d.Code == "" || !strings.Contains(we.Message, d.Code) {
				t.Errorf("%s.%s: details %s do not carry the original code", tc.family, tc.method, we.Details)
			}
		}
	}
	if !strings.Contains(logs.String(), `code=acme.kv.key_not_found`) {
		t.Errorf("no log line names the undeclared code:\n%s", logs.String())
	}
}
