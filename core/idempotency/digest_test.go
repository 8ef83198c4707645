package idempotency

import (
	"testing"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":[true,false,null]}`, `{"a":[true,false,null],"b":1e0}`},
		{" { \"a\" : \"x\" } ", `{"a":"x"}`},
		{`1.0`, `1e0`},
		{`10e-1`, `1e0`},
		{`0.1E1`, `1e0`},
		{`100`, `1e2`},
		{`-0.00`, `0`},
		{`-0`, `0`},
		{`0e5`, `0`},
		{`-12.5e+3`, `-125e2`},
		{`12345678901234567890`, `1234567890123456789e1`},
		{`"\u0041\u00e9\n\u001f\/"`, "\"A\u00e9\\n\\u001f/\""},
		{`{"a":1,"a":2}`, `{"a":2e0}`},
		// UTF-16 order: U+FF61 sorts after U+1F600 in UTF-8, before it in UTF-16.
		{"{\"\U0001F600\":1,\"\uFF61\":2}", "{\"\U0001F600\":1e0,\"\uFF61\":2e0}"},
	} {
		got, err := Canonical([]byte(tc.in))
		if err != nil {
			t.Errorf("Canonical(%s): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Canonical(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{``, `{`, `{} {}`, "\"\xff\"", `[1,]`} {
		if _, err := Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%q) accepted", bad)
		}
	}
}

func TestRequestDigest(t *testing.T) {
	base := RequestDigest("kvdemo.remember", []byte(`{"key":"k","value":"v"}`))
	for name, other := range map[string]string{
		"reordered": `{"value":"v","key":"k"}`,
		"spaced":    "{ \"key\" : \"k\",\n \"value\" : \"v\" }",
	} {
		if got := RequestDigest("kvdemo.remember", []byte(other)); got != base {
			t.Errorf("%s: digest %s, want %s", name, got, base)
		}
	}
	for name, d := range map[string]string{
		"another node":  RequestDigest("kvdemo.forget", []byte(`{"key":"k","value":"v"}`)),
		"another value": RequestDigest("kvdemo.remember", []byte(`{"key":"k","value":"w"}`)),
		"a big integer": RequestDigest("kvdemo.remember", []byte(`{"key":"k","value":"v","n":12345678901234567891}`)),
	} {
		if d == base {
			t.Errorf("%s: same digest as the base request", name)
		}
	}
	n1 := RequestDigest("a.b", []byte(`{"n":12345678901234567890}`))
	n2 := RequestDigest("a.b", []byte(`{"n":12345678901234567891}`))
	if n1 == n2 {
		t.Error("integers beyond float64 precision share a digest")
	}
	// Invalid UTF-8 is digested as bytes: two inputs a decoder would make
	// equal (both become U+FFFD) stay different.
	if RequestDigest("a.b", []byte("\"\xff\"")) == RequestDigest("a.b", []byte("\"\xfe\"")) {
		t.Error("invalid UTF-8 inputs share a digest")
	}
	// The typeId cannot slide into the input.
	if RequestDigest("a.b", []byte(`1`)) == RequestDigest("a.b1", []byte(``)) {
		t.Error("typeId and input run together")
	}
}
