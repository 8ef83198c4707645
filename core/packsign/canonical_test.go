package packsign

import (
	"math"
	"strconv"
	"testing"
)

// The canonical JSON is RFC 8785's, checked against the RFC's own
// examples: §3.2.2 (whitespace, literals, number forms, string escapes),
// §3.2.3 (key order by UTF-16 code units) and Appendix B (number forms).
func TestCanonicalRFC8785Examples(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"§3.2.2 values", `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{"§3.2.3 sorting", `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"escapes: the short forms, other controls as \\u00XX, nothing else", `["\b\f\n\r\t", "\u0000\u001f\u007f", "\u00e9\ud83d\ude00", "<>&'\/"]`,
			"[\"\\b\\f\\n\\r\\t\",\"\\u0000\\u001f\u007f\",\"é😀\",\"<>&'/\"]"},
		{"nesting keeps array order", `{"b": [3, {"z": 1, "a": 2}], "a": {}}`, `{"a":{},"b":[3,{"a":2,"z":1}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// Appendix B of RFC 8785: IEEE 754 doubles and their canonical form.
func TestCanonicalRFC8785Numbers(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			// Written in Go's shortest round-trip form, which is not
			// ECMAScript's, so that the canonical form has to be made.
			in := strconv.FormatFloat(math.Float64frombits(tt.bits), 'g', -1, 64)
			got, err := Canonical([]byte("[" + in + "]"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "["+tt.want+"]" {
				t.Errorf("%s (%#016x): got %s, want [%s]", in, tt.bits, got, tt.want)
			}
		})
	}
}

// What is not I-JSON has no canonical form: a repeated key, trailing data.
func TestCanonicalRefuses(t *testing.T) {
	for _, in := range []string{`{"a":1,"a":2}`, `{"a":1} {}`, `{"a":`, `[NaN]`} {
		if got, err := Canonical([]byte(in)); err == nil {
			t.Errorf("%s: canonical form %s, want an error", in, got)
		}
	}
}
