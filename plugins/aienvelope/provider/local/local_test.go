package local

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/wophost/wophost/plugins/aienvelope/provider"
	"github.com/wophost/wophost/sdk/families/aienvelope"
)

const agentRules = `{"rules":[
  {"on":"tool","contains":"18C","text":"It is 18C in Paris."},
  {"on":"user","match":"(?i)weather","toolCalls":[{"name":"get_weather","arguments":{"city":"Paris"}}]},
  {"on":"system","contains":"verdict","json":{"verdict":"approve"}}
]}`

func mustParse(t *testing.T, doc string) []Rule {
	t.Helper()
	r, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func user(s string) aienvelope.Message {
	return aienvelope.Message{Role: aienvelope.RoleUser, Content: s}
}

func TestAgentLoop(t *testing.T) {
	p := New("", mustParse(t, agentRules))
	ctx := context.Background()
	req := &provider.Request{Messages: []aienvelope.Message{user("What's the weather?")}}
	first, err := p.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.FinishReason != provider.FinishToolCalls || len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != "get_weather" ||
		string(first.ToolCalls[0].Arguments) != `{"city":"Paris"}` || first.Model != DefaultModel {
		t.Fatalf("first turn %+v", first)
	}
	again, _ := p.Generate(ctx, req)
	if !reflect.DeepEqual(first, again) {
		t.Errorf("same request, different answers:\n%+v\n%+v", first, again)
	}
	tc := first.ToolCalls[0]
	req.Messages = append(req.Messages,
		aienvelope.Message{Role: aienvelope.RoleAssistant, ToolCalls: []aienvelope.ToolCall{tc}},
		aienvelope.Message{Role: aienvelope.RoleTool, ToolCallID: tc.ID, Content: "18C, sunny"})
	second, err := p.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if second.Text != "It is 18C in Paris." || second.FinishReason != provider.FinishStop || len(second.ToolCalls) != 0 {
		t.Errorf("second turn %+v", second)
	}
}

func TestTemplateIsHonestAndDeterministic(t *testing.T) {
	p := New("", nil)
	temp := 0.7
	req := &provider.Request{Messages: []aienvelope.Message{user("hello there")}, Temperature: &temp}
	a, err := p.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Generate(context.Background(), req)
	if a.Text != b.Text || !strings.Contains(a.Text, "not a language model") || !strings.Contains(a.Text, `"hello there"`) {
		t.Errorf("template text %q", a.Text)
	}
	if len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0].Message, "temperature") {
		t.Errorf("warnings %+v", a.Warnings)
	}
	if a.Usage.InputTokens == 0 || a.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v", a.Usage)
	}
}

func TestRuleJSONAndSystemTarget(t *testing.T) {
	p := New("m", mustParse(t, agentRules))
	got, err := p.Generate(context.Background(), &provider.Request{System: "give a verdict", Messages: []aienvelope.Message{user("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != `{"verdict":"approve"}` || got.Model != "m" {
		t.Errorf("got %+v", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]string{
		`{"rules":[{"on":"elsewhere","text":"x"}]}`:                "rules[0].on",
		`{"rules":[{"match":"(","text":"x"}]}`:                     "rules[0].match",
		`{"rules":[{"text":"x","json":1}]}`:                        "exactly one",
		`{"rules":[{}]}`:                                           "exactly one",
		`{"rules":[{"toolCalls":[{"name":""}]}]}`:                  "rules[0].toolCalls[0].name",
		`{"rules":[{"toolCalls":[{"name":"f","arguments":[1]}]}]}`: "arguments",
		`{"rules":[{"text":"x","typo":1}]}`:                        "unknown field",
		`not json`:                                                 "rules",
	}
	for doc, want := range tests {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want an error mentioning %q", doc, err, want)
		}
	}
}

func TestInstance(t *testing.T) {
	tests := []struct{ schema, want string }{
		{`{"type":"object","required":["name","tags","n","ok","kind"],"properties":{
			"name":{"type":"string","minLength":3},
			"tags":{"type":"array","minItems":2,"items":{"type":"string","format":"email"}},
			"n":{"type":"integer","minimum":5,"multipleOf":2},
			"ok":{"type":"boolean"},
			"kind":{"enum":["a","b"]},
			"skipped":{"type":"string"}}}`,
			`{"kind":"a","n":6,"name":"xxx","ok":false,"tags":["local@example.invalid","local@example.invalid"]}`},
		{`{"const":{"fixed":true}}`, `{"fixed":true}`},
		{`{"type":"number","exclusiveMinimum":1.5}`, `2.5`},
		{`{"type":["null","string"],"default":"d"}`, `"d"`},
		{`{"$defs":{"p":{"type":"object","required":["x"],"properties":{"x":{"type":"integer","maximum":-3}}}},"$ref":"#/$defs/p"}`, `{"x":-3}`},
		{`{"allOf":[{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}},{"required":["b"],"properties":{"b":{"const":1}}}]}`, `{"a":"","b":1}`},
		{`{"anyOf":[{"type":"integer"},{"type":"string"}]}`, `0`},
		{`true`, `{}`},
	}
	for _, tt := range tests {
		var s any
		if err := json.Unmarshal([]byte(tt.schema), &s); err != nil {
			t.Fatal(err)
		}
		v, err := Instance(s)
		if err != nil {
			t.Errorf("Instance(%s): %v", tt.schema, err)
			continue
		}
		b, _ := json.Marshal(v)
		if string(b) != tt.want {
			t.Errorf("Instance(%s) = %s, want %s", tt.schema, b, tt.want)
		}
	}
	var cyclic any
	_ = json.Unmarshal([]byte(`{"$ref":"#"}`), &cyclic)
	if _, err := Instance(cyclic); err == nil {
		t.Error("a cyclic schema did not fail")
	}
	var remote any
	_ = json.Unmarshal([]byte(`{"$ref":"https://example.invalid/s.json"}`), &remote)
	if _, err := Instance(remote); err == nil {
		t.Error("a remote reference did not fail")
	}
}
