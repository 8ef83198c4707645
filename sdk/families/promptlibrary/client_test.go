package promptlibrary

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

type recordedCall struct {
	family, method, body string
}

// fakeCaller behaves like a real wop.Caller: it marshals req and
// unmarshals a canned JSON answer into res.
type fakeCaller struct {
	calls  []recordedCall
	answer string
	err    error
}

func (f *fakeCaller) Call(_ context.Context, family, method string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	f.calls = append(f.calls, recordedCall{family, method, string(b)})
	if f.err != nil {
		return f.err
	}
	if res != nil && f.answer != "" {
		return json.Unmarshal([]byte(f.answer), res)
	}
	return nil
}

func TestNilClient(t *testing.T) {
	var c *Client
	_, err := c.Get(context.Background(), &GetRequest{PromptID: "p@1"})
	var we *wop.Error
	if !errors.As(err, &we) {
		t.Fatalf("error = %v, want *wop.Error", err)
	}
	if we.Code != wop.CodeCapabilityNotProvided || we.Capability != "host.promptLibrary.get" {
		t.Fatalf("error = %q/%q", we.Code, we.Capability)
	}
	if NewClient(nil, nil) != nil {
		t.Error("NewClient(nil) is not nil")
	}
}

func TestGet(t *testing.T) {
	// Raw holds a trailing newline, CRLF and a non-ASCII rune: verbatim
	// means all of them survive.
	f := &fakeCaller{answer: `{"promptId":"summarize@3","name":"summarize","version":"3",
		"digest":"sha256:abc","systemPrompt":"Be brief.","envelopeType":"summary",
		"variables":{"tone":{"default":"neutral"}},"raw":"system: Be brief.\r\nnote: café\n"}`}
	p, err := NewClient(f, nil).Get(context.Background(), &GetRequest{PromptID: "summarize@3"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.calls[0], (recordedCall{"promptLibrary", "get", `{"promptId":"summarize@3"}`}); got != want {
		t.Errorf("call = %+v, want %+v", got, want)
	}
	want := Prompt{
		PromptID: "summarize@3", Name: "summarize", Version: "3", Digest: "sha256:abc",
		SystemPrompt: "Be brief.", EnvelopeType: "summary",
		Raw: "system: Be brief.\r\nnote: café\n",
	}
	if string(p.Variables) != `{"tone":{"default":"neutral"}}` {
		t.Errorf("variables = %s", p.Variables)
	}
	p.Variables = nil
	if !reflect.DeepEqual(*p, want) {
		t.Errorf("prompt = %+v, want %+v", *p, want)
	}
}

func TestPromptMarshal(t *testing.T) {
	b, err := json.Marshal(Prompt{PromptID: "p@1", Name: "p", Version: "1", Digest: "sha256:00", SystemPrompt: "s", Raw: "s\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"promptId":"p@1","name":"p","version":"1","digest":"sha256:00","systemPrompt":"s","raw":"s\n"}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

func TestCallerErrorUnchanged(t *testing.T) {
	want := &wop.Error{Code: CodePromptUnpinned, Message: "summarize is not pinned", Capability: "host.promptLibrary.get"}
	f := &fakeCaller{err: want}
	if _, err := NewClient(f, nil).Get(context.Background(), &GetRequest{PromptID: "summarize"}); err != want {
		t.Errorf("error = %#v, want %#v", err, want)
	}
}

func TestNilRequest(t *testing.T) {
	f := &fakeCaller{}
	if _, err := NewClient(f, nil).Get(context.Background(), nil); wop.CodeOf(err) != wop.CodeValidation {
		t.Errorf("Get(nil) = %v, want validation_error", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("host called %d times, want 0", len(f.calls))
	}
}
