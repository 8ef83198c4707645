package httpstatus

import (
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

// Every code an answer can carry is registered or a valid vendor code,
// and has a status.
func TestCodesAreAnswerable(t *testing.T) {
	for code, status := range Codes() {
		if status < 400 || status > 599 {
			t.Errorf("%s: status %d", code, status)
		}
		// Registered codes are plain snake_case; every dotted one is ours.
		if strings.Contains(code, ".") && (!wop.ValidVendorCode(code) || !strings.HasPrefix(code, "wophost.")) {
			t.Errorf("%s: not a wophost vendor code", code)
		}
	}
	for ctx, code := range ctxTable() {
		if _, ok := statusTable()[code]; !ok {
			t.Errorf("%s maps to %s, which has no status", ctx, code)
		}
	}
}

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		status  int
		code    string
		details string
	}{
		{"unauthorized spelling", wop.Errorf("unauthenticated", "token"), 401, "unauthenticated", `{"retryable":false}`},
		{"capability", wop.NotProvided("host.mcp.client"), 422, "capability_not_provided", `{"capability":"host.mcp.client","retryable":false}`},
		{"alias", wop.Errorf(wop.CodeHostCapabilityMissing, "m"), 422, "capability_not_provided", `{"retryable":false}`},
		{"not declared", wop.Errorf(wop.CodeCapabilityNotDeclared, "m"), 403, "forbidden", `{"retryable":false}`},
		{"depth", wop.Errorf(wop.CodeCallDepthExceeded, "m"), 422, "recursion_limit_exceeded", `{"retryable":false}`},
		{"storage", wop.Errorf(wop.CodeUnavailable, "m").WithDetails(map[string]string{"storage": "idempotency_keys"}), 503, "wophost.storage_unavailable", `{"retryable":true,"storage":"idempotency_keys"}`},
		{"our fields win", wop.Errorf(wop.CodeNotFound, "m").WithDetails(map[string]any{"retryable": "yes", "k": 1}), 404, "not_found", `{"k":1,"retryable":false}`},
		{"scalar details", wop.Errorf(wop.CodeNotFound, "m").WithDetails("x"), 404, "not_found", `{"data":"x","retryable":false}`},
		{"malformed code", wop.Errorf("acme.kv.key_not_found", "m"), 500, "internal_error", `{"code":"acme.kv.key_not_found","retryable":false}`},
		{"empty message", &wop.Error{Code: wop.CodeNotFound}, 404, "not_found", `{"retryable":false}`},
		{"credentials", wop.Errorf("credential_unavailable", "m"), 501, "credential_unavailable", `{"retryable":false}`},
		{"engine", wop.Errorf("pack_engine_unsupported", "m"), 400, "pack_engine_unsupported", `{"retryable":false}`},
		{"peer undefined", wop.Errorf("pack_peer_dependency_undefined", "m"), 400, "pack_peer_dependency_undefined", `{"retryable":false}`},
		{"signature", wop.Errorf("pack_signature_invalid", "m").WithDetails(map[string]string{"reason": "key_unknown"}), 400, "pack_signature_invalid", `{"reason":"key_unknown","retryable":false}`},
		{"run expired", wop.Errorf(CodeRunExpired, "m").WithDetails(map[string]string{"runId": "run_01"}), 410, "run_expired", `{"retryable":false,"runId":"run_01"}`},
		{"replay diverged", wop.Errorf(CodeReplayDivergedAtRefusal, "m"), 409, "replay_diverged_at_refusal", `{"retryable":false}`},
		{"replay source missing", wop.Errorf(CodeReplaySourceMissing, "m"), 409, "replay_source_missing", `{"retryable":false}`},
		{"requirement unmet", wop.Errorf(wop.CodePackRuntimeRequirementUnmet, "m").WithDetails(map[string]any{"unmet": []string{"subprocess"}, "manifest": "p@1.0.0"}), 400, "pack_runtime_requirement_unmet", `{"manifest":"p@1.0.0","retryable":false,"unmet":["subprocess"]}`},
		{"sandbox timeout", wop.Errorf(wop.CodeSandboxTimeout, "m"), 504, "wophost.deadline_exceeded", `{"retryable":false}`},
		{"sandbox memory", wop.Errorf(wop.CodeSandboxMemoryExceeded, "m").WithDetails(map[string]int{"limitBytes": 1 << 20}), 500, "internal_error", `{"code":"sandbox_memory_exceeded","limitBytes":1048576,"retryable":false}`},
		{"sandbox capability", wop.Errorf(wop.CodeSandboxCapabilityDenied, "m").WithDetails(map[string]string{"requestedCapability": "net.outbound"}), 500, "internal_error", `{"code":"sandbox_capability_denied","requestedCapability":"net.outbound","retryable":false}`},
		{"sandbox escape", wop.Errorf(wop.CodeSandboxEscapeAttempt, "m"), 500, "internal_error", `{"code":"sandbox_escape_attempt","retryable":false}`},
	} {
		status, env := Refusal(tc.err)
		if status != tc.status || env.Error != tc.code || string(env.Details) != tc.details || env.Message == "" {
			t.Errorf("%s: %d %+v (details %s); want %d %s %s", tc.name, status, env, env.Details, tc.status, tc.code, tc.details)
		}
	}
}

func TestKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		ran  bool
		err  error
		want bool
	}{
		{"success", true, nil, true},
		{"ran, failed for good", true, wop.Errorf(wop.CodeInternal, "panic"), true},
		{"ran, failed retryably", true, wop.Errorf("provider_rate_limited", "slow").WithRetryable(true), false},
		{"ran, unavailable", true, wop.Errorf(wop.CodeUnavailable, "plugin went away"), false},
		{"refused: not found", false, wop.Errorf(wop.CodeNotFound, "m"), true},
		{"refused: capability not provided", false, wop.NotProvided("host.aiEnvelope"), true},
		{"refused: validation", false, wop.Errorf(wop.CodeValidation, "m"), false},
		{"refused: forbidden", false, wop.Errorf(wop.CodeCapabilityNotDeclared, "m"), false},
		{"refused: internal", false, wop.Errorf(wop.CodeInternal, "m"), false},
		{"refused: in flight", false, wop.Errorf("idempotency_in_flight", "m").WithRetryable(true), false},
	} {
		if got := Kept(tc.ran, tc.err); got != tc.want {
			t.Errorf("%s: Kept = %v, want %v", tc.name, got, tc.want)
		}
	}
}
