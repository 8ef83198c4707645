package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// formatJSON prints '<', '>' and '&' as themselves, however the value
// came escaped, and leaves every other byte as encoding/json would print
// it: an escaped backslash before "u003c" is no escape of '<', U+2028
// stays escaped, member order and numbers are kept.
func TestFormatJSON(t *testing.T) {
	for _, c := range []struct{ in, compact, indented string }{
		{`{"v":"\u003cb\u003e\u0026"}`, `{"v":"<b>&"}`, "{\n  \"v\": \"<b>&\"\n}"},
		{`{"v":"<b>&"}`, `{"v":"<b>&"}`, "{\n  \"v\": \"<b>&\"\n}"},
		{`["\u003C\u003E\u0026"]`, `["<>&"]`, "[\n  \"<>&\"\n]"},
		{`{"v":"\\u003c"}`, `{"v":"\\u003c"}`, "{\n  \"v\": \"\\\\u003c\"\n}"},
		{"{\"v\":\"a\u2028b\"}", `{"v":"a\u2028b"}`, "{\n  \"v\": \"a\\u2028b\"\n}"},
		{`{"z":1.50e10,"a":[],"m":{}}`, `{"z":1.50e10,"a":[],"m":{}}`, "{\n  \"z\": 1.50e10,\n  \"a\": [],\n  \"m\": {}\n}"},
	} {
		for indent, want := range map[bool]string{false: c.compact, true: c.indented} {
			got, err := formatJSON([]byte(c.in), indent)
			if err != nil || string(got) != want {
				t.Errorf("formatJSON(%s, %v) = %s, %v; want %s", c.in, indent, got, err, want)
			}
		}
	}
	// A Go value and a raw value print alike.
	for _, v := range []any{map[string]string{"v": "<b>&"}, json.RawMessage(`{"v":"\u003cb\u003e\u0026"}`)} {
		var b bytes.Buffer
		if err := writeJSON(&b, v, false); err != nil || b.String() != `{"v":"<b>&"}`+"\n" {
			t.Errorf("writeJSON(%v) = %q, %v", v, b.String(), err)
		}
	}
	if _, err := formatJSON([]byte(`{"v":`), false); err == nil {
		t.Error("formatJSON took a truncated value")
	}
}

// noHTMLEscapes fails t when out holds an HTML escape or lacks want.
func noHTMLEscapes(t *testing.T, what, out, want string) {
	t.Helper()
	for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
		if strings.Contains(out, esc) {
			t.Errorf("%s prints %s:\n%s", what, esc, out)
		}
	}
	if !strings.Contains(out, want) {
		t.Errorf("%s lacks %q:\n%s", what, want, out)
	}
}

// host packs verify and host conformance print a path holding <b>& as it
// is, in their text and their --json output.
func TestCommandsPrintHTMLCharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x<b>&")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "host.hcl")
	if err := os.WriteFile(cfg, []byte("host {\n  state_dir = \"state\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(dir, "pack")
	for _, json := range []bool{false, true} {
		args := []string{"--config", cfg, "packs", "verify", pack}
		if json {
			args = append([]string{"--json"}, args...)
		}
		var stdout, stderr bytes.Buffer
		if code := execute(args, strings.NewReader(""), &stdout, &stderr); code != 1 {
			t.Fatalf("%q: exit %d, want 1: %s", args, code, stderr.String())
		}
		noHTMLEscapes(t, strings.Join(args, " "), stdout.String(), pack+`/pack.json`)
	}

	file := filepath.Join(dir, "conformance.hcl")
	if err := os.WriteFile(file, []byte("plugin {\n  executable = \"launcher.sh\"\n}\nconfig {}\ncall \"a.b\" {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	launcher := filepath.Join(dir, "launcher.sh")
	if err := os.WriteFile(launcher, []byte("#!/bin/sh\necho not a handshake\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"--json", "conformance", "--config", file}, strings.NewReader(""), &stdout, &stderr); code != 1 {
		t.Fatalf("conformance --json: exit %d, want 1: %s", code, stderr.String())
	}
	noHTMLEscapes(t, "conformance --json", stdout.String(), launcher)
}
