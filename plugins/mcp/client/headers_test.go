package client

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEncodeHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"us-west-1":       "us-west-1",
		"two words":       "two words",
		" lead":           "=?base64?IGxlYWQ=?=",
		"trail ":          "=?base64?dHJhaWwg?=",
		"tab\there":       "=?base64?dGFiCWhlcmU=?=",
		"line\r\nbreak":   "=?base64?bGluZQ0KYnJlYWs=?=",
		"日本":              "=?base64?5pel5pys?=",
		"=?base64?abc?=":  "=?base64?PT9iYXNlNjQ/YWJjPz0=?=",
		"=?base64?almost": "=?base64?almost",
	} {
		if got := encodeHeaderValue(in); got != want {
			t.Errorf("encode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestToolHeadersValidity(t *testing.T) {
	valid := `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"},"o":{"type":"object","properties":{"b":{"type":"integer","x-mcp-header":"B-2"}}}}}`
	h, err := ToolHeaders(json.RawMessage(valid))
	if err != nil || len(h) != 2 || h[0].Name != "A" || strings.Join(h[1].Path, "/") != "o/b" {
		t.Fatalf("valid schema: %+v %v", h, err)
	}
	for name, schema := range map[string]string{
		"number type":    `{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}`,
		"duplicate":      `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}`,
		"empty":          `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`,
		"not a token":    `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`,
		"control char":   `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A\r\n"}}}`,
		"inside items":   `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`,
		"inside oneOf":   `{"type":"object","oneOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`,
		"inside $defs":   `{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"A"}}}`,
		"on the root":    `{"type":"object","x-mcp-header":"A"}`,
		"non-string val": `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":1}}}`,
	} {
		if _, err := ToolHeaders(json.RawMessage(schema)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParamHeaderValues(t *testing.T) {
	specs := []ParamHeader{{Name: "S", Path: []string{"s"}, Type: "string"}, {Name: "I", Path: []string{"i"}, Type: "integer"},
		{Name: "B", Path: []string{"b"}, Type: "boolean"}, {Name: "N", Path: []string{"n"}, Type: "string"}}
	got := paramHeaderValues(specs, json.RawMessage(`{"s":"","i":9007199254740993,"b":true,"n":null}`))
	want := []header{{"Mcp-Param-S", ""}, {"Mcp-Param-B", "true"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("headers = %v, want %v (empty string sent, unsafe integer and null omitted)", got, want)
	}
}
