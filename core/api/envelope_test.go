package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/sdk/wop"
)

// envelopeSchema compiles testdata/openwop-error-envelope.schema.json,
// our restatement of OpenWOP's HTTP error envelope, once per test binary.
var envelopeSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	return jsonschema.NewCompiler().Compile("testdata/openwop-error-envelope.schema.json")
})

// answer is a parsed error envelope.
type answer struct {
	Error   string         `json:"error"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// envelope checks that w's body is a valid OpenWOP error envelope and
// returns it parsed.
func envelope(t *testing.T, w *httptest.ResponseRecorder) *answer {
	t.Helper()
	validEnvelope(t, w.Body.Bytes())
	var a answer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	return &a
}

func validEnvelope(t *testing.T, body []byte) {
	t.Helper()
	schema, err := envelopeSchema()
	if err != nil {
		t.Fatalf("envelope schema: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: not JSON: %v", body, err)
	}
	if err := schema.Validate(v); err != nil {
		t.Fatalf("%s: not an OpenWOP error envelope: %v", body, err)
	}
}

// The schema itself refuses what OpenWOP refuses, so a passing body means
// something.
func TestEnvelopeSchemaRefuses(t *testing.T) {
	schema, err := envelopeSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"code":"not_found","message":"m","retryable":false}`,
		`{"error":"not_found","message":""}`,
		`{"error":"unavailable","message":"m"}`,
		`{"error":"internal","message":"m"}`,
		`{"error":"acme.kv.key_not_found","message":"m"}`,
		`{"error":"openwop.thing","message":"m"}`,
		`{"error":"Acme.thing","message":"m"}`,
		`{"error":"not_found","message":"m","details":[1]}`,
		`{"error":"not_found","message":"m","retryable":true}`,
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if schema.Validate(v) == nil {
			t.Errorf("schema accepts %s", body)
		}
	}
	for _, body := range []string{
		`{"error":"not_found","message":"m"}`,
		`{"error":"acme.key_not_found","message":"m","details":{}}`,
		`{"error":"my-org.x_y","message":"m","details":{"a":1}}`,
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if err := schema.Validate(v); err != nil {
			t.Errorf("schema refuses %s: %v", body, err)
		}
	}
}

// Every way the API refuses a request answers a valid OpenWOP envelope
// with the status its code has.
func TestEveryErrorPathIsAnOpenWOPEnvelope(t *testing.T) {
	type check struct {
		name       string
		server     *Server
		method     string
		path, body string
		header     map[string]string
		status     int
		code       string
		retryAfter bool
		// details the answer must carry
		details map[string]any
		// extra checks on the answer
		check func(t *testing.T, w *httptest.ResponseRecorder)
	}
	refusedWith := func(err error) *Server {
		f := newFake()
		f.err = err
		return New(NewCurrent(f), Options{})
	}
	plain := New(NewCurrent(newFake()), Options{MaxBodyBytes: 64})
	noHost := New(NewCurrent(nil), Options{})
	authed := New(NewCurrent(newFake()), Options{Tokens: []string{"secret"}})
	const exec = "/v1/nodes/kvdemo.remember:execute"
	for _, tc := range []check{
		{name: "wrong method", server: plain, method: "DELETE", path: "/v1/packs", status: 405, code: "wophost.method_not_allowed",
			check: func(t *testing.T, w *httptest.ResponseRecorder) {
				if w.Header().Get("Allow") != "GET, HEAD" {
					t.Errorf("Allow %q", w.Header().Get("Allow"))
				}
			}},
		{name: "unknown route", server: plain, method: "GET", path: "/v2/nothing", status: 404, code: "not_found"},
		{name: "execute without :execute", server: plain, method: "POST", path: "/v1/nodes/kvdemo.remember", body: `{}`, status: 404, code: "not_found"},
		{name: "typeId too long", server: plain, method: "POST", path: "/v1/nodes/" + strings.Repeat("a", 300) + ":execute", body: `{}`, status: 404, code: "not_found"},
		{name: "body too large", server: plain, method: "POST", path: exec, body: `{"input":{"k":"` + strings.Repeat("x", 100) + `"}}`, status: 413, code: "payload_too_large"},
		{name: "body not JSON", server: plain, method: "POST", path: exec, body: `{`, status: 400, code: "validation_error"},
		{name: "unknown body field", server: plain, method: "POST", path: exec, body: `{"inputs":{}}`, status: 400, code: "validation_error"},
		{name: "trailing data", server: plain, method: "POST", path: exec, body: `{} {}`, status: 400, code: "validation_error"},
		{name: "negative timeout", server: plain, method: "POST", path: exec, body: `{"timeoutMs":-1}`, status: 400, code: "validation_error"},
		{name: "bad key", server: plain, method: "POST", path: exec, body: `{}`, header: map[string]string{HeaderIdempotencyKey: ""}, status: 400, code: "idempotency_key_invalid"},
		{name: "no host: execute", server: noHost, method: "POST", path: exec, body: `{}`, status: 503, code: "runner_unavailable", retryAfter: true,
			details: map[string]any{"retryable": true}},
		{name: "no host: discovery", server: noHost, method: "GET", path: "/.well-known/openwop", status: 503, code: "runner_unavailable", retryAfter: true},
		{name: "no host: plugins", server: noHost, method: "GET", path: "/v1/plugins", status: 503, code: "runner_unavailable", retryAfter: true},
		{name: "no host: readyz", server: noHost, method: "GET", path: "/readyz", status: 503, code: "runner_unavailable", retryAfter: true,
			details: map[string]any{"status": "not ready", "reason": "no host is running", "retryable": true}},
		{name: "no host: packs", server: noHost, method: "GET", path: "/v1/packs", status: 503, code: "runner_unavailable", retryAfter: true},
		{name: "no agents", server: plain, method: "GET", path: "/v1/agents", status: 404, code: "not_found",
			details: map[string]any{"capability": "host.agents.manifestRuntime", "retryable": false}},
		{name: "no token", server: authed, method: "GET", path: "/v1/plugins", status: 401, code: "unauthenticated",
			check: func(t *testing.T, w *httptest.ResponseRecorder) {
				if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate %q", w.Header().Get("WWW-Authenticate"))
				}
			}},
		{name: "unknown node", server: refusedWith(wop.Errorf(wop.CodeNotFound, `no loaded pack serves node "x.y"`)), method: "POST", path: exec, body: `{}`, status: 404, code: "not_found"},
		{name: "input invalid", server: refusedWith(wop.Errorf(wop.CodeValidation, "input does not match").WithDetails(map[string]any{"violations": []any{map[string]any{"pointer": "/key", "message": "missing"}}})),
			method: "POST", path: exec, body: `{}`, status: 400, code: "validation_error",
			check: func(t *testing.T, w *httptest.ResponseRecorder) {
				if !strings.Contains(w.Body.String(), `"violations":[{"message":"missing","pointer":"/key"}]`) {
					t.Errorf("violations not in details: %s", w.Body)
				}
			}},
		{name: "capability not provided at dispatch", server: refusedWith(wop.NotProvided("host.aiEnvelope.await").WithDetails(map[string]string{"typeId": "a.b"})),
			method: "POST", path: exec, body: `{}`, status: 422, code: "capability_not_provided",
			details: map[string]any{"capability": "host.aiEnvelope.await", "typeId": "a.b", "retryable": false}},
		{name: "pack restarting", server: refusedWith(wop.Errorf(wop.CodeUnavailable, "pack p is restarting").WithRetryable(true).WithDetails(map[string]string{"pack": "p", "state": "restarting"})),
			method: "POST", path: exec, body: `{}`, status: 503, code: "runner_unavailable", retryAfter: true,
			details: map[string]any{"pack": "p", "state": "restarting", "retryable": true}},
		{name: "pack failed", server: refusedWith(wop.Errorf(wop.CodeUnavailable, "pack p is failed").WithDetails(map[string]string{"pack": "p", "state": "failed"})),
			// unavailable is transient by the contract's rule, whatever the flag.
			method: "POST", path: exec, body: `{}`, status: 503, code: "runner_unavailable", retryAfter: true, details: map[string]any{"retryable": true}},
		{name: "state directory full", server: refusedWith(wop.Errorf(wop.CodeUnavailable, "the state directory cannot take writes").WithRetryable(true).WithDetails(map[string]string{"storage": "state_dir"})),
			method: "POST", path: exec, body: `{}`, status: 503, code: "wophost.storage_unavailable", retryAfter: true,
			details: map[string]any{"storage": "state_dir", "retryable": true}},
		{name: "key mismatch", server: refusedWith(wop.Errorf(idempotency.CodeKeyMismatch, "different request")), method: "POST", path: exec, body: `{}`, status: 409, code: "idempotency_key_mismatch"},
		{name: "key in flight", server: refusedWith(wop.Errorf(idempotency.CodeInFlight, "still running").WithRetryable(true)), method: "POST", path: exec, body: `{}`, status: 409, code: "idempotency_in_flight", retryAfter: true},
		{name: "internal", server: refusedWith(wop.Errorf(wop.CodeInternal, "encode facets")), method: "POST", path: exec, body: `{}`, status: 500, code: "internal_error"},
		{name: "plain Go error", server: refusedWith(context.Canceled), method: "POST", path: exec, body: `{}`, status: 500, code: "internal_error"},
		{name: "deadline before dispatch", server: refusedWith(wop.Errorf(wop.CodeDeadlineExceeded, "deadline passed")), method: "POST", path: exec, body: `{}`, status: 504, code: "wophost.deadline_exceeded"},
		{name: "a code no answer has", server: refusedWith(wop.Errorf("prompt_store_unavailable", "down")), method: "POST", path: exec, body: `{}`, status: 500, code: "internal_error",
			details: map[string]any{"code": "prompt_store_unavailable"}},
		{name: "details not an object", server: refusedWith(wop.Errorf(wop.CodeNotFound, "m").WithDetails([]int{1, 2})), method: "POST", path: exec, body: `{}`, status: 404, code: "not_found",
			details: map[string]any{"data": []any{1.0, 2.0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header[k] = []string{v}
			}
			w := httptest.NewRecorder()
			tc.server.ServeHTTP(w, req)
			e := envelope(t, w)
			if w.Code != tc.status || e.Error != tc.code {
				t.Fatalf("%d %s; want %d %s", w.Code, w.Body, tc.status, tc.code)
			}
			if got := w.Header().Get("Retry-After") != ""; got != tc.retryAfter {
				t.Errorf("Retry-After %q, want one: %v", w.Header().Get("Retry-After"), tc.retryAfter)
			}
			if _, ok := e.Details["retryable"].(bool); !ok {
				t.Errorf("details.retryable missing: %s", w.Body)
			}
			for k, want := range tc.details {
				if got, _ := json.Marshal(e.Details[k]); string(got) != string(mustJSON(t, want)) {
					t.Errorf("details.%s = %s, want %s", k, got, mustJSON(t, want))
				}
			}
			if tc.check != nil {
				tc.check(t, w)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A node that ran is answered 200 with its outcome, failures included; a
// failure keeps the ctx-level envelope and its family code.
func TestExecuteAnswersRunOutcomes(t *testing.T) {
	f := newFake()
	s := New(NewCurrent(f), Options{})
	for _, tc := range []struct {
		name string
		res  *host.RunResult
		err  error
		want string
	}{
		{"succeeded", &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{"ok":true}`)}, nil,
			`{"runId":"run_1","status":"succeeded","output":{"ok":true}}`},
		{"failed with a family code", &host.RunResult{RunID: "run_2"}, wop.Errorf("prompt_not_found", "no prompt p").WithCapability("host.promptLibrary.get"),
			`{"runId":"run_2","status":"failed","error":{"code":"prompt_not_found","message":"no prompt p","capability":"host.promptLibrary.get","retryable":false}}`},
		{"deadline during the run", &host.RunResult{RunID: "run_3"}, wop.Errorf(wop.CodeDeadlineExceeded, "node did not finish before its deadline"),
			`{"runId":"run_3","status":"failed","error":{"code":"deadline_exceeded","message":"node did not finish before its deadline","retryable":false}}`},
		{"pack exited during the run", &host.RunResult{RunID: "run_4"}, wop.Errorf(wop.CodeUnavailable, "pack p exited").WithRetryable(true),
			`{"runId":"run_4","status":"failed","error":{"code":"unavailable","message":"pack p exited","retryable":true}}`},
	} {
		f.res, f.err = tc.res, tc.err
		w := execute(t, s, `{"input":{}}`, nil)
		if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != tc.want {
			t.Errorf("%s: %d %s\nwant 200 %s", tc.name, w.Code, w.Body, tc.want)
		}
		if w.Header().Get("Retry-After") != "" {
			t.Errorf("%s: an outcome with Retry-After", tc.name)
		}
	}
}

// Every registered code the host answers with (httpstatus.Codes, the
// undotted ones) is in the schema's enum of registered codes, so an answer
// with a newly registered code cannot pass only by luck.
func TestEnvelopeSchemaListsEveryRegisteredCode(t *testing.T) {
	data, err := os.ReadFile("testdata/openwop-error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Error struct {
				AnyOf []struct {
					Enum []string `json:"enum"`
				} `json:"anyOf"`
			} `json:"error"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	enum := map[string]bool{}
	for _, alt := range doc.Properties.Error.AnyOf {
		for _, c := range alt.Enum {
			enum[c] = true
		}
	}
	if len(enum) == 0 {
		t.Fatal("the schema lists no registered codes")
	}
	for code := range httpstatus.Codes() {
		if !strings.Contains(code, ".") && !enum[code] {
			t.Errorf("registered code %s is answered but not in the schema's enum", code)
		}
	}
	for _, code := range []string{httpstatus.CodeRunExpired, httpstatus.CodeReplayDivergedAtRefusal} {
		validEnvelope(t, []byte(`{"error":"`+code+`","message":"m","details":{}}`))
	}
}
