package idempotency

import (
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

func TestCheckKey(t *testing.T) {
	valid := []string{
		strings.Repeat("a", 22),
		strings.Repeat("Z", 128),
		"order-2026-12-01_retry.1~x",
		"0123456789abcdefABCDEF._~-",
	}
	for _, k := range valid {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v, want nil", k, err)
		}
	}
	invalid := map[string]string{
		"empty":         "",
		"21 characters": strings.Repeat("a", 21),
		"129":           strings.Repeat("a", 129),
		"space":         "abcdefghijklmnopqrstu v",
		"slash":         "abcdefghijklmnopqrstu/v",
		"colon":         "abcdefghijklmnopqrstu:v",
		"non-ASCII":     "abcdefghijklmnopqrstué",
		"plus":          "abcdefghijklmnopqrstu+v",
	}
	for name, k := range invalid {
		err := CheckKey(k)
		if wop.CodeOf(err) != CodeKeyInvalid {
			t.Errorf("%s: CheckKey = %v, want %s", name, err, CodeKeyInvalid)
			continue
		}
		if k != "" && strings.Contains(err.Error(), k) {
			t.Errorf("%s: the error repeats the key: %v", name, err)
		}
	}
}

func TestIDSeparatesScopesAndHidesTheKey(t *testing.T) {
	const key = "customer-42-order-0001-aaaa"
	a, b := ID("", key), ID(Scope("token-one"), key)
	if a == b || ID(Scope("token-one"), key) != b || ID(Scope("token-two"), key) == b {
		t.Fatalf("ids do not separate scopes: %s %s", a, b)
	}
	if len(a) != 64 || strings.Contains(a, "customer") || checkID(a) != nil {
		t.Fatalf("id %q is not a hex digest", a)
	}
	if Scope("") != "" || strings.Contains(Scope("token-one"), "token") {
		t.Fatalf("scope leaks or is not empty for no credential: %q", Scope("token-one"))
	}
	// A scope cannot slide into the key: ("a", "bc") and ("ab", "c") differ.
	if ID("a", "b"+key) == ID("ab", key) {
		t.Fatal("scope and key run together")
	}
}

func TestFinal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		err    *wop.Error
		want   bool
	}{
		{"success", 0, nil, true},
		{"not found", 404, wop.Errorf("not_found", "x"), true},
		{"a node's *_not_found", 404, wop.Errorf("acme.kv.key_not_found", "x"), true},
		{"unprocessable", 422, wop.Errorf("envelope_validation_failed", "x"), true},
		{"validation_error", 400, wop.Errorf(wop.CodeValidation, "x"), false},
		{"key invalid", 400, wop.Errorf(CodeKeyInvalid, "x"), false},
		{"forbidden", 403, wop.Errorf(wop.CodeCapabilityNotDeclared, "x"), false},
		{"unauthorized", 401, wop.Errorf("unauthorized", "x"), false},
		{"rate limited", 429, wop.Errorf("provider_rate_limited", "x"), false},
		{"in flight", 409, wop.Errorf(CodeInFlight, "x").WithRetryable(true), false},
		{"a retryable 4xx", 404, wop.Errorf("not_found", "x").WithRetryable(true), false},
		{"internal", 500, wop.Errorf(wop.CodeInternal, "x"), false},
		{"unavailable", 503, wop.Errorf(wop.CodeUnavailable, "x").WithRetryable(true), false},
		{"deadline", 504, wop.Errorf(wop.CodeDeadlineExceeded, "x"), false},
		{"not provided", 501, wop.NotProvided("host.aiEnvelope"), false},
	} {
		if got := Final(tc.status, tc.err); got != tc.want {
			t.Errorf("%s: Final(%d, %v) = %v, want %v", tc.name, tc.status, tc.err, got, tc.want)
		}
	}
}
