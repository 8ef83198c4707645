package strictjson

import (
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/wop"
)

func TestDecode(t *testing.T) {
	type in struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	for data, want := range map[string]string{
		`{"a":1,"b":"x"}`:   "",
		``:                  "",
		`  `:                "",
		`null`:              "",
		`{"a":1} {"b":"2"}`: "data after the JSON value",
		`{"a":1}{}`:         "data after the JSON value",
		`{"c":1}`:           `unknown field "c"`,
		`{"a":"one"}`:       `field "a": expected int, got JSON string`,
		`[1]`:               `field "(root)"`,
		`{"a":`:             "unexpected EOF",
		`{"a":1,}`:          "malformed JSON at byte",
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
