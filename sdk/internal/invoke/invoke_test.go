package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/sdk/wop"
)

func TestSafely(t *testing.T) {
	_, err := Safely(hclog.NewNullLogger(), "node", func() (any, error) { panic("boom") })
	if wop.CodeOf(err) != wop.CodeInternal || !strings.Contains(err.Error(), "node panicked: boom") {
		t.Fatalf("panic: %v", err)
	}
	out, err := Safely(hclog.NewNullLogger(), "node", func() (any, error) { return 1, nil })
	if out != 1 || err != nil {
		t.Fatalf("Safely = %v, %v", out, err)
	}
}

func TestFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if we := Failure(ctx, errors.New("read tcp: use of closed connection")); we.Code != wop.CodeDeadlineExceeded {
		t.Errorf("a plain error after the deadline is %s", we.Code)
	}
	if we := Failure(ctx, wop.Errorf("acme.nope", "m")); we.Code != "acme.nope" {
		t.Errorf("an envelope is kept: %s", we.Code)
	}
	if we := Failure(context.Background(), errors.New("x")); we.Code != wop.CodeInternal {
		t.Errorf("a plain error is internal: %s", we.Code)
	}
}

func TestResult(t *testing.T) {
	for _, tc := range []struct {
		out  any
		max  int
		want string
		code string
	}{
		{nil, 0, "null", ""},
		{json.RawMessage(nil), 0, "null", ""},
		{json.RawMessage(`{"a":1}`), 0, `{"a":1}`, ""},
		{json.RawMessage(`{"a":`), 0, "", wop.CodeInternal},
		{map[string]int{"a": 1}, 0, `{"a":1}`, ""},
		{func() {}, 0, "", wop.CodeInternal},
		{strings.Repeat("x", 20), 10, "", wop.CodeUpstreamUnavailable},
		{"short", 10, `"short"`, ""},
	} {
		b, we := Result(tc.out, tc.max, "result")
		switch {
		case tc.code == "" && (we != nil || string(b) != tc.want):
			t.Errorf("Result(%v) = %s, %v; want %s", tc.out, b, we, tc.want)
		case tc.code != "" && (we == nil || we.Code != tc.code):
			t.Errorf("Result(%v) error %v, want %s", tc.out, we, tc.code)
		}
	}
}
