package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pureField matches a Family's Pure field in a generated main.go.
var pureField = regexp.MustCompile(`(?m)^\s*Pure:\s+\[\]string\{methodPut\},`)

// host new plugin declares its method pure with --pure only: a method
// declared pure is called again on a replay, so a method that writes
// state (put) must not be one by default.
func TestNewPluginPureFlag(t *testing.T) {
	sdk, err := filepath.Abs(filepath.Join("..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		pure bool
	}{
		{nil, false},
		{[]string{"--pure"}, true},
		{[]string{"--pure=false"}, false},
	} {
		dir := filepath.Join(t.TempDir(), "store")
		args := append([]string{"new", "plugin", "store", "--family", "acme.store", "--method", "put", "--dir", dir, "--sdk", sdk}, c.args...)
		var stdout, stderr bytes.Buffer
		if code := execute(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		main, err := os.ReadFile(filepath.Join(dir, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		if got := pureField.Match(main); got != c.pure {
			t.Errorf("%q: main.go declares put pure: %v, want %v", c.args, got, c.pure)
		}
	}
}
