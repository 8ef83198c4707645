package canonjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// canonSeeds are RFC 8785's own examples (its section 3.2.2 input, the
// number forms of its appendix B, the sorting example of 3.2.3) and edge
// cases of strings, nesting and whitespace.
var canonSeeds = []string{
	`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
	`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
	`[0, -0, 1e-7, 1e21, 9007199254740993, 295147905179352830000, 5e-324, 1.7976931348623157e308]`,
	" { \"a\" : [ 1 , { \"b\" : \"\\t\\b\\f\\u0001\" } ] , \"\" : true } ",
	`"just a string"`, `null`, `12`, `[]`, `{}`,
	`{"a":1,"a":2}`,
	`[1,]`, `{"a" 1}`, `01`, `1.`, `-`, `"\x"`, `"\ud800"`, "\"a\u0001\"", `[1e400]`, `tru`,
}

func TestTransformMatchesJCS(t *testing.T) {
	for _, in := range canonSeeds {
		checkCanonical(t, []byte(in))
	}
}

func FuzzTransform(f *testing.F) {
	for _, in := range canonSeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(checkCanonical)
}

// checkCanonical holds Transform to jcs.Transform on valid JSON, and
// to an error on anything else.
func checkCanonical(t *testing.T, in []byte) {
	got, err := Transform(in)
	if !json.Valid(in) {
		if err == nil {
			t.Errorf("%q is not JSON, yet Transform gave %q", in, got)
		}
		return
	}
	// jcs.Transform refuses a scalar text with whitespace around it (" 0"),
	// which is valid JSON; the whitespace means nothing, so it gets none.
	want, werr := jcs.Transform(bytes.TrimSpace(in))
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: Transform error %v, jcs.Transform error %v", in, err, werr)
	}
	if err == nil && string(got) != string(want) {
		t.Errorf("%q:\ngot  %s\nwant %s", in, got, want)
	}
}
