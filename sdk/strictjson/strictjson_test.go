package strictjson

import (
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

func TestDecode(t *testing.T) {
	type in struct {
		A   int    `json:"a"`
		B   string `json:"b"`
		Sub *struct {
			X int `json:"x"`
		} `json:"sub"`
	}
	for data, want := range map[string]string{
		`{"a":1,"b":"x"}`:       "",
		`{"\u0061":1}`:          "",
		``:                      "",
		`  `:                    "",
		`null`:                  "",
		`{"a":1} {"b":"2"}`:     "data after the JSON value",
		`{"a":1}{}`:             "data after the JSON value",
		`{"c":1}`:               `unknown member "c"`,
		`{"A":1}`:               `unknown member "A"`,
		`{"sub":{"X":1}}`:       `unknown member "X" (at /sub/X)`,
		`{"a":1,"a":2}`:         `member "a" appears twice`,
		`{"a":1,"\u0061":2}`:    `member "a" appears twice`,
		`{"sub":{"x":1,"x":1}}`: `member "x" appears twice (at /sub/x)`,
		"{\"b\":\"\xff\"}":      "invalid UTF-8",
		"{\"\xff\":1}":          "invalid UTF-8",
		`{"a":"one"}`:           `member "a": expected int, got JSON string`,
		`[1]`:                   `member "(root)"`,
		`{"a":`:                 "unexpected end of the JSON value",
		`{"a":1,}`:              "malformed JSON at byte",
	} {
		var v in
		err := Decode([]byte(data), &v, "input")
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", data, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || wop.CodeOf(err) != wop.CodeValidation):
			t.Errorf("%q: error %v, want validation_error containing %q", data, err, want)
		}
	}
}

func TestFlag(t *testing.T) {
	for _, c := range []struct {
		data string
		set  bool
		want string // the refusal's text, "" for none
	}{
		{`{"async":true}`, true, ""},
		{`{"\u0061sync":true}`, true, ""},
		{`{"async":false}`, false, ""},
		{`{"async":null}`, false, ""},
		{`{}`, false, ""},
		{`{"model":"m","other":{"Async":true}}`, false, ""},
		{`{"Async":true}`, false, `unknown member "Async"; the member is spelled "async"`},
		{`{"ASYNC":false}`, false, `unknown member "ASYNC"`},
		{`{"async":false,"async":true}`, false, `member "async" appears twice`},
		{`{"async":true,"\u0061sync":false}`, false, `member "async" appears twice`},
		{`{"x":{"y":1,"y":2}}`, false, `member "y" appears twice`},
		{`{"async":"true"}`, false, `member "async": expected a boolean, got JSON string`},
		{`{"async":1}`, false, "expected a boolean, got JSON number"},
		{"{\"p\":\"\xff\",\"async\":true}", false, "invalid UTF-8"},
		{`[{"async":true}]`, false, "a JSON object is expected, got JSON array"},
		{`{"async":true} {}`, false, "data after the JSON value"},
		{`{"async":true`, false, "unexpected end"},
		{``, false, ""},
		{` null `, false, ""},
		{`nul`, false, "unexpected end"},
		{`nil`, false, "malformed JSON"},
	} {
		set, err := Flag([]byte(c.data), "async", "request")
		switch {
		case c.want == "" && (err != nil || set != c.set):
			t.Errorf("%q: %v, %v; want %v", c.data, set, err, c.set)
		case c.want != "" && (err == nil || set || !strings.Contains(err.Error(), c.want) || wop.CodeOf(err) != wop.CodeValidation):
			t.Errorf("%q: %v, %v; want a validation_error containing %q", c.data, set, err, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	for data, ok := range map[string]bool{
		`{"a":[1,{"b":2}]}`:  true,
		`"x"`:                true,
		`{"a":1,"a":1}`:      false,
		`[{"b":1,"b":1}]`:    false,
		"\"\xff\"":           false,
		`{} 1`:               false,
		`{"A":1,"a":1}`:      true,
		`{"a":1,"\u0061":1}`: false,
		`{"a":"\ud800"}`:     false,
	} {
		if err := Check([]byte(data), "request"); (err == nil) != ok {
			t.Errorf("%q: %v, want accepted %v", data, err, ok)
		}
	}
}
