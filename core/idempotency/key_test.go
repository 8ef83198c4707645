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
		name      string
		status    int
		code      string
		retryable bool
		want      bool
	}{
		{"not found", 404, "not_found", false, true},
		{"capability not provided", 422, "capability_not_provided", false, true},
		{"mismatch", 409, CodeKeyMismatch, false, false},
		{"validation_error", 400, wop.CodeValidation, false, false},
		{"key invalid", 400, CodeKeyInvalid, false, false},
		{"another 400", 400, "pack_validation_failed", false, false},
		{"forbidden", 403, "forbidden", false, false},
		{"unauthenticated", 401, "unauthenticated", false, false},
		{"rate limited", 429, "rate_limited", false, false},
		{"in flight", 409, CodeInFlight, true, false},
		{"a retryable 4xx", 404, "not_found", true, false},
		{"internal", 500, "internal_error", false, false},
		{"unavailable", 503, "runner_unavailable", true, false},
		{"a 2xx is no refusal", 200, "not_found", false, false},
	} {
		if got := Final(tc.status, tc.code, tc.retryable); got != tc.want {
			t.Errorf("%s: Final(%d, %s, %v) = %v, want %v", tc.name, tc.status, tc.code, tc.retryable, got, tc.want)
		}
	}
}
