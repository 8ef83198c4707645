package wop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Code: CodeNotFound, Message: "no key a"}, "not_found: no key a"},
		{&Error{Code: CodeNotFound, Message: "no key a", Capability: "host.acme.kv.get"}, "not_found: no key a (host.acme.kv.get)"},
		{Errorf(CodeValidation, "field %q: %d bytes", "key", 3), `validation_error: field "key": 3 bytes`},
		{NotProvided("host.aiEnvelope.await"), "capability_not_provided: host.aiEnvelope.await is not advertised by this host (host.aiEnvelope.await)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorsIs(t *testing.T) {
	notFound := &Error{Code: CodeNotFound, Message: "no key"}
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same code", notFound, &Error{Code: CodeNotFound}, true},
		{"wrapped", fmt.Errorf("get: %w", notFound), &Error{Code: CodeNotFound}, true},
		{"twice wrapped", fmt.Errorf("b: %w", fmt.Errorf("a: %w", notFound)), &Error{Code: CodeNotFound}, true},
		{"other code", notFound, &Error{Code: CodeValidation}, false},
		{"not an Error target", notFound, errors.New("not_found"), false},
		{"alias to canonical", &Error{Code: CodeHostCapabilityMissing}, &Error{Code: CodeCapabilityNotProvided}, true},
		{"canonical to alias", NotProvided("host.mcp"), &Error{Code: CodeHostCapabilityMissing}, true},
		{"alias to alias", &Error{Code: CodeHostCapabilityMissing}, &Error{Code: CodeHostCapabilityMissing}, true},
		{"alias to other", &Error{Code: CodeHostCapabilityMissing}, &Error{Code: CodeCapabilityNotDeclared}, false},
		{"message ignored", &Error{Code: CodeInternal, Message: "a"}, &Error{Code: CodeInternal, Message: "b"}, true},
		{"vendor code", &Error{Code: "acme.conflict"}, &Error{Code: "acme.conflict"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}
}

func TestWithCopies(t *testing.T) {
	orig := &Error{Code: CodeNotFound, Message: "m"}
	c := orig.WithCapability("host.acme.kv.get")
	r := orig.WithRetryable(true)
	d := orig.WithDetails(map[string]int{"b": 2, "a": 1})
	if orig.Capability != "" || orig.Retryable || orig.Details != nil {
		t.Fatalf("original changed: %#v", orig)
	}
	if c == orig || c.Capability != "host.acme.kv.get" || c.Code != CodeNotFound || c.Message != "m" {
		t.Errorf("WithCapability = %#v", c)
	}
	if r == orig || !r.Retryable || r.Code != CodeNotFound {
		t.Errorf("WithRetryable = %#v", r)
	}
	if d == orig || string(d.Details) != `{"a":1,"b":2}` || d.Message != "m" {
		t.Errorf("WithDetails = %#v", d)
	}
	if r.WithRetryable(false).Retryable {
		t.Error("WithRetryable(false) kept the flag")
	}
}

func TestWithDetailsUnmarshalable(t *testing.T) {
	for _, v := range []any{make(chan int), func() {}, map[string]any{"f": func() {}}} {
		orig := Errorf(CodeValidation, "bad input").WithCapability("host.acme.kv.put").WithRetryable(true)
		got := orig.WithDetails(v)
		if got == nil {
			t.Fatalf("WithDetails(%T) = nil", v)
		}
		if got.Code != CodeValidation || got.Capability != "host.acme.kv.put" || !got.Retryable || got.Details != nil {
			t.Errorf("WithDetails(%T) = %#v, want the error kept without details", v, got)
		}
		if !strings.HasPrefix(got.Message, "bad input (details dropped: ") {
			t.Errorf("WithDetails(%T) message = %q", v, got.Message)
		}
		if orig.Message != "bad input" {
			t.Errorf("original message changed to %q", orig.Message)
		}
	}
}

func TestErrorJSON(t *testing.T) {
	b, err := json.Marshal(Errorf(CodeNotFound, "m"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"code":"not_found","message":"m","retryable":false}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	b, err = json.Marshal(Errorf(CodeNotFound, "m").WithCapability("c").WithDetails([]int{1}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"code":"not_found","message":"m","capability":"c","retryable":false,"details":[1]}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}

func TestAsErrorAndCodeOf(t *testing.T) {
	we := &Error{Code: CodeNotFound, Message: "m"}
	if got := AsError(nil); got != nil {
		t.Errorf("AsError(nil) = %#v", got)
	}
	if got := AsError(we); got != we {
		t.Errorf("AsError(*Error) = %p, want %p", got, we)
	}
	if got := AsError(fmt.Errorf("a: %w", fmt.Errorf("b: %w", we))); got != we {
		t.Errorf("AsError(wrapped) = %#v, want the wrapped *Error", got)
	}
	if got := AsError(errors.Join(errors.New("x"), we)); got != we {
		t.Errorf("AsError(joined) = %#v, want the joined *Error", got)
	}
	got := AsError(errors.New("boom"))
	if got.Code != CodeInternal || got.Message != "boom" || got.Retryable || got.Capability != "" {
		t.Errorf("AsError(plain) = %#v", got)
	}

	if CodeOf(nil) != "" {
		t.Errorf("CodeOf(nil) = %q", CodeOf(nil))
	}
	if got := CodeOf(fmt.Errorf("w: %w", we)); got != CodeNotFound {
		t.Errorf("CodeOf(wrapped) = %q", got)
	}
	if got := CodeOf(context.Canceled); got != CodeInternal {
		t.Errorf("CodeOf(plain) = %q", got)
	}
}

func TestNotProvided(t *testing.T) {
	got := NotProvided("host.mcp.client")
	if got.Code != CodeCapabilityNotProvided || got.Capability != "host.mcp.client" ||
		got.Message != "host.mcp.client is not advertised by this host" || got.Retryable {
		t.Errorf("NotProvided = %#v", got)
	}
}

func TestCodeOfTypedNil(t *testing.T) {
	var we *Error
	var err error = we
	if got := CodeOf(err); got != "" {
		t.Fatalf("CodeOf(typed nil) = %q, want empty", got)
	}
}
