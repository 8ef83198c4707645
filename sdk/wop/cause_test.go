package wop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// nestByHand wraps inner in depth family errors the way code written
// before WithCause did: the cause under details.cause, the flag left
// false. Each level is a different non-retryable family error, so the
// chain includes family errors that themselves wrap the cause.
func nestByHand(inner *Error, depth int) *Error {
	e := inner
	wrappers := []string{"consensus_failed", "acme.conflict", "agent_budget_exceeded"}
	for i := range depth {
		e = (&Error{Code: wrappers[i%len(wrappers)], Message: fmt.Sprintf("level %d", depth-i)}).
			WithDetails(map[string]any{"level": depth - i, "cause": e})
	}
	return e
}

// nestWithCause builds the same chain through WithCause.
func nestWithCause(inner *Error, depth int) *Error {
	e := inner
	wrappers := []string{"consensus_failed", "acme.conflict", "agent_budget_exceeded"}
	for i := range depth {
		e = (&Error{Code: wrappers[i%len(wrappers)], Message: fmt.Sprintf("level %d", depth-i)}).
			WithDetails(map[string]any{"level": depth - i}).WithCause(e)
	}
	return e
}

func TestRetryableThroughNesting(t *testing.T) {
	codes := []struct {
		code      string
		flag      bool
		retryable bool
	}{
		{CodeUnavailable, true, true},
		{CodeUnavailable, false, true}, // transient by definition, flag or not
		{CodeDeadlineExceeded, false, false},
		{CodeDeadlineExceeded, true, true}, // a hop's deadline, marked by HopError
		{CodeCancelled, false, false},
		{CodeCancelled, true, false}, // the caller gave up; never a reason to retry
		{CodeUpstreamUnavailable, true, true},
		{CodeUpstreamUnavailable, false, false}, // e.g. a result over max_message_bytes
		{"provider_unavailable", true, true},
		{"provider_rate_limited", true, true},
		{"provider_quota_exhausted", false, false},
		{"prompt_store_unavailable", true, true},
		{"mailbox_full", true, true},
		{"acme.busy", true, true},
		{CodeCapabilityNotProvided, false, false},
		{CodeValidation, false, false},
		{CodeInternal, false, false},
		// Containment: the same policy or limit meets a retry again.
		{CodePackRuntimeRequirementUnmet, false, false},
		{CodeSandboxMemoryExceeded, false, false},
		{CodeSandboxTimeout, false, false},
		{CodeSandboxCapabilityDenied, false, false},
		{CodeSandboxEscapeAttempt, false, false},
	}
	for _, c := range codes {
		for _, depth := range []int{0, 1, 2, 3, 5, maxCauseDepth} {
			name := fmt.Sprintf("%s/flag=%v/depth=%d", c.code, c.flag, depth)
			t.Run(name, func(t *testing.T) {
				inner := &Error{Code: c.code, Message: "at the bottom", Retryable: c.flag}

				byHand := nestByHand(inner, depth)
				if got := IsRetryable(byHand); got != c.retryable {
					t.Errorf("IsRetryable(nested by hand) = %v, want %v", got, c.retryable)
				}
				if got := IsRetryable(fmt.Errorf("wrapped in Go: %w", byHand)); got != c.retryable {
					t.Errorf("IsRetryable(Go-wrapped) = %v, want %v", got, c.retryable)
				}
				if depth > 0 {
					if got := byHand.Classified().Retryable; got != c.retryable {
						t.Errorf("Classified().Retryable = %v, want %v", got, c.retryable)
					}
				}

				built := nestWithCause(inner, depth)
				if depth > 0 && built.Retryable != c.retryable {
					t.Errorf("WithCause chain: top retryable = %v, want %v", built.Retryable, c.retryable)
				}
				// The chain survives a trip through JSON, as it does across
				// every process hop.
				b, err := json.Marshal(built)
				if err != nil {
					t.Fatal(err)
				}
				var back Error
				if err := json.Unmarshal(b, &back); err != nil {
					t.Fatal(err)
				}
				if got := IsRetryable(&back); got != c.retryable {
					t.Errorf("IsRetryable after JSON = %v, want %v", got, c.retryable)
				}
			})
		}
	}
}

func TestRetryableDepthIsBounded(t *testing.T) {
	inner := &Error{Code: CodeUnavailable, Message: "deep"}
	if !IsRetryable(nestByHand(inner, maxCauseDepth)) {
		t.Errorf("a cause %d levels down is not found", maxCauseDepth)
	}
	if IsRetryable(nestByHand(inner, maxCauseDepth+1)) {
		t.Errorf("a cause %d levels down is found; the walk must stop at %d", maxCauseDepth+1, maxCauseDepth)
	}
}

func TestRetryableMalformedDetails(t *testing.T) {
	for _, details := range []string{
		`[1,2]`, `"text"`, `null`, `{}`, `{"cause":null}`, `{"cause":"unavailable"}`,
		`{"cause":{"message":"no code","retryable":true}}`, `{"cause":[{"code":"unavailable"}]}`,
		`{"cause":{"code":"x","details":{"cause":{"code":"y","details":"not an object"}}}}`,
	} {
		e := &Error{Code: "consensus_failed", Message: "m", Details: json.RawMessage(details)}
		if IsRetryable(e) {
			t.Errorf("IsRetryable with details %s = true", details)
		}
		if got := e.Classified(); got != e {
			t.Errorf("Classified with details %s made a copy: %#v", details, got)
		}
	}
	if IsRetryable(nil) {
		t.Error("IsRetryable(nil) = true")
	}
	if IsRetryable(errors.New("plain")) {
		t.Error("a plain Go error is internal, not retryable")
	}
}

func TestWithCause(t *testing.T) {
	cause := Errorf(CodeUnavailable, "host.aiEnvelope.generate: the plugin went away during the call").
		WithCapability("host.aiEnvelope.generate").WithRetryable(true)
	top := Errorf("consensus_failed", "round 1 produced no valid ballot").
		WithDetails(map[string]any{"rounds": 1}).WithCause(cause)

	if !top.Retryable {
		t.Fatalf("top not retryable: %#v", top)
	}
	if want := "round 1 produced no valid ballot (retryable: caused by unavailable)"; top.Message != want {
		t.Errorf("message = %q, want %q", top.Message, want)
	}
	var d struct {
		Rounds int             `json:"rounds"`
		Cause  json.RawMessage `json:"cause"`
	}
	if err := json.Unmarshal(top.Details, &d); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(cause)
	if d.Rounds != 1 || string(d.Cause) != string(want) {
		t.Errorf("details = %s, want rounds 1 and the cause %s unaltered", top.Details, want)
	}
	if again := top.Classified(); again != top {
		t.Error("Classified of a classified error made a copy")
	}
	if again := top.WithCause(cause); again.Message != top.Message {
		t.Errorf("WithCause twice noted the cause twice: %q", again.Message)
	}
}

func TestWithCauseNoNote(t *testing.T) {
	// A top that is retryable itself gets no note: the flag is its own.
	own := Errorf(CodeUnavailable, "agent a: step: down").WithCause(Errorf(CodeUnavailable, "down"))
	if !own.Retryable || own.Message != "agent a: step: down" {
		t.Errorf("unavailable top = %#v", own)
	}
	flagged := Errorf("mailbox_full", "full").WithRetryable(true).WithCause(Errorf(CodeUnavailable, "down"))
	if !flagged.Retryable || flagged.Message != "full" {
		t.Errorf("flagged top = %#v", flagged)
	}
	// A cause that is not retryable leaves the top as it was.
	plain := Errorf("consensus_failed", "no ballot").WithCause(Errorf(CodeValidation, "no vote"))
	if plain.Retryable || plain.Message != "no ballot" {
		t.Errorf("top over a validation_error = %#v", plain)
	}
	cancelled := Errorf("consensus_failed", "no ballot").WithCause(Errorf(CodeCancelled, "gave up").WithRetryable(true))
	if cancelled.Retryable || strings.Contains(cancelled.Message, "retryable") {
		t.Errorf("top over cancelled = %#v", cancelled)
	}
	// The caller gave up: what failed underneath does not matter.
	gaveUp := Errorf(CodeCancelled, "the call was cancelled").WithCause(Errorf(CodeUnavailable, "down"))
	if gaveUp.Retryable || IsRetryable(gaveUp) || strings.Contains(gaveUp.Message, "retryable") {
		t.Errorf("cancelled over unavailable = %#v", gaveUp)
	}
	// Nor does it become retryable one level further up.
	above := nestByHand(gaveUp, 2)
	if IsRetryable(above) || above.Classified().Retryable {
		t.Errorf("a family error over cancelled over unavailable is retryable: %s", above.Details)
	}
}

func TestWithCauseEdges(t *testing.T) {
	orig := Errorf("consensus_failed", "m").WithDetails(map[string]int{"rounds": 2})
	if got := orig.WithCause(nil); got == orig || string(got.Details) != `{"rounds":2}` || got.Retryable {
		t.Errorf("WithCause(nil) = %#v", got)
	}
	var typedNil *Error
	if got := orig.WithCause(typedNil); string(got.Details) != `{"rounds":2}` {
		t.Errorf("WithCause(typed nil) = %#v", got)
	}
	got := orig.WithCause(errors.New("disk on fire"))
	if got.Retryable || string(got.Details) != `{"cause":{"code":"internal","message":"disk on fire","retryable":false},"rounds":2}` {
		t.Errorf("WithCause(plain error) = %#v (details %s)", got, got.Details)
	}
	list := Errorf("consensus_failed", "m").WithDetails([]int{1, 2}).WithCause(Errorf(CodeUnavailable, "down"))
	if string(list.Details) != `{"cause":{"code":"unavailable","message":"down","retryable":false},"details":[1,2]}` || !list.Retryable {
		t.Errorf("WithCause over list details = %#v (details %s)", list, list.Details)
	}
	if orig.Retryable || string(orig.Details) != `{"rounds":2}` || orig.Message != "m" {
		t.Errorf("original changed: %#v", orig)
	}
}

func TestClassified(t *testing.T) {
	bare := &Error{Code: CodeUnavailable, Message: "down"}
	if got := bare.Classified(); !got.Retryable || got.Message != "down" || bare.Retryable {
		t.Errorf("Classified(unavailable without flag) = %#v, original %#v", got, bare)
	}
	var nilErr *Error
	if nilErr.Classified() != nil {
		t.Error("Classified(nil) is not nil")
	}
	hand := nestByHand(&Error{Code: "provider_rate_limited", Message: "slow down", Retryable: true}, 2)
	got := hand.Classified()
	if !got.Retryable || got.Message != "level 1 (retryable: caused by provider_rate_limited)" {
		t.Errorf("Classified(hand-built chain) = %#v", got)
	}
	if hand.Retryable {
		t.Error("Classified changed its receiver")
	}
}

func TestHopError(t *testing.T) {
	deadline := Errorf(CodeDeadlineExceeded, "the call's deadline passed")
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	future, cancelFuture := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFuture()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	// The call context's deadline passed although ctx has none of its own.
	callPast := WithCallContext(context.Background(), CallContext{Deadline: time.Now().Add(-time.Second)})
	callFuture := WithCallContext(future, CallContext{Deadline: time.Now().Add(time.Hour)})
	// ctx's timer has not fired, but its deadline is already behind us.
	notYetFired := WithCallContext(future, CallContext{Deadline: time.Now().Add(-time.Millisecond)})

	tests := []struct {
		name      string
		ctx       context.Context
		err       error
		retryable bool
	}{
		{"no deadline of the caller's", context.Background(), deadline, true},
		{"the caller's deadline is ahead", future, deadline, true},
		{"the call context's deadline is ahead", callFuture, deadline, true},
		{"the caller's deadline passed", past, deadline, false},
		{"the call context's deadline passed", callPast, deadline, false},
		{"the call context's deadline passed before ctx noticed", notYetFired, deadline, false},
		{"the caller cancelled", cancelled, deadline, false},
		{"wrapped in Go", context.Background(), fmt.Errorf("call: %w", deadline), true},
		{"another code", context.Background(), Errorf(CodeValidation, "bad"), false},
		{"cancelled by someone else", context.Background(), Errorf(CodeCancelled, "gone"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HopError(tt.ctx, tt.err)
			if got.Retryable != tt.retryable {
				t.Errorf("HopError = %#v, want retryable %v", got, tt.retryable)
			}
			if got.Code != AsError(tt.err).Code || got.Message != AsError(tt.err).Message {
				t.Errorf("HopError changed the envelope: %#v", got)
			}
		})
	}
	if deadline.Retryable {
		t.Error("HopError changed the error it was given")
	}
	if HopError(context.Background(), nil) != nil {
		t.Error("HopError(nil) is not nil")
	}
	flagged := deadline.WithRetryable(true)
	if HopError(past, flagged) != flagged {
		t.Error("HopError unmarked an error its producer marked retryable")
	}
}
