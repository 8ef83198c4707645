package wop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// A token matches only itself, and the zero token matches nothing.
func TestRunTokenMatches(t *testing.T) {
	a := NewRunToken("s3cret-a")
	if !a.Matches(NewRunToken("s3cret-a")) {
		t.Error("a token does not match the same secret")
	}
	for _, u := range []RunToken{{}, NewRunToken("s3cret-b"), NewRunToken("s3cret-"), NewRunToken("s3cret-aa")} {
		if a.Matches(u) || u.Matches(a) {
			t.Errorf("%q matches %q", a.Reveal(), u.Reveal())
		}
	}
	if (RunToken{}).Matches(RunToken{}) {
		t.Error("two zero tokens match: a run without a token would bind calls without one")
	}
	if !(RunToken{}).IsZero() || NewRunToken("").Reveal() != "" || !NewRunToken("").IsZero() || a.IsZero() {
		t.Error("IsZero or Reveal disagree with the secret")
	}
}

// No way of printing or encoding a token or a call context reaches the
// secret: logging a call context does not leak it.
func TestRunTokenIsNeverPrinted(t *testing.T) {
	const secret = "tok-5ecr3t"
	call := CallContext{RunID: "run_1", Token: NewRunToken(secret)}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v"} {
		outs = append(outs, fmt.Sprintf(verb, call.Token), fmt.Sprintf(verb, call), fmt.Sprintf(verb, &call))
	}
	outs = append(outs, call.Token.String(), call.Token.GoString(), fmt.Sprint(call.Token), fmt.Sprintln(call))
	for _, v := range []any{call, &call, call.Token, map[string]any{"t": call.Token}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(b))
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	logger.Info("call", "token", call.Token, "call", call)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("call", "token", call.Token, "call", call)
	outs = append(outs, buf.String())
	for _, out := range outs {
		if strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", secret)) || strings.Contains(out, fmt.Sprintf("%X", secret)) {
			t.Errorf("the secret is printed: %s", out)
		}
	}
	if got := fmt.Sprint(call.Token); got != "RunToken(redacted)" {
		t.Errorf("a token prints as %q, want RunToken(redacted)", got)
	}
	if got := fmt.Sprint(RunToken{}); got != "RunToken(none)" {
		t.Errorf("the zero token prints as %q, want RunToken(none)", got)
	}
	// A call context's JSON has no token at all, so a record or a plugin
	// that echoes the call context carries none.
	b, _ := json.Marshal(call)
	if string(b) != `{"runId":"run_1"}` {
		t.Errorf("call context JSON = %s, want the token left out", b)
	}
}
