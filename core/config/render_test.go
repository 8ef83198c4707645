package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func TestWriteDiagnostics(t *testing.T) {
	const src = `host {
  log_level = "info"
}

capability "kv" {
  required = true
  plugin   = "nope"
}
`
	f := newFixture(t, src)
	l := NewLoader()
	_, diags := loadChecked(l, f.path)
	diags = append(diags,
		&hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Something odd", Detail: "No location."},
		&hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Unknown file",
			Subject:  &hcl.Range{Filename: "other.hcl", Start: hcl.Pos{Line: 3, Column: 4}, End: hcl.Pos{Line: 3, Column: 5}},
		},
	)
	out := renderString(t, l, diags)
	t.Logf("rendered:\n%s", out)

	want := []string{
		"Error: Plugin not found\n\n",
		"  on " + f.path + `:7:14 (in capability "kv"):` + "\n",
		"     6 │   required = true\n",
		"     7 │   plugin   = \"nope\"\n",
		"       │              ^^^^^^\n",
		"  Cannot use plugin executable " + f.dir,
		"Warning: Something odd\n\n  No location.\n",
		"Warning: Unknown file\n\n  on other.hcl:3:4:\n\n",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if strings.Contains(out, "other.hcl:3:4:\n     ") {
		t.Error("snippet printed for a file that was never loaded")
	}
}

func TestWriteDiagnosticsRelativeName(t *testing.T) {
	f := newFixture(t, "capability \"kv\" {\n  plugin = \"nope\"\n}\n")
	t.Chdir(f.dir)
	for _, path := range []string{"host.hcl", f.path} {
		l := NewLoader()
		_, diags := loadChecked(l, path)
		out := renderString(t, l, diags)
		want := "  on host.hcl:2:12 (in capability \"kv\"):\n     1 │ capability \"kv\" {\n     2 │   plugin = \"nope\"\n       │            ^^^^^^\n"
		if !strings.Contains(out, want) {
			t.Errorf("loading %s rendered\n%s\nwant it to contain\n%s", path, out, want)
		}
		if got := FormatDiagnostic(diags[0]); !strings.HasPrefix(got, "host.hcl:2:12: Plugin not found: ") {
			t.Errorf("FormatDiagnostic = %q", got)
		}
	}
}

func TestWriteDiagnosticsMultiLineSubject(t *testing.T) {
	const src = "capability \"kv\" {\n  plugin = \"wophost-kv\"\n  families = [\n    \"a\",\n    \"a\",\n  ]\n}\n"
	f := newFixture(t, src)
	l := NewLoader()
	_, diags := l.Load(f.path)
	out := renderString(t, l, diags)
	t.Logf("rendered:\n%s", out)
	for _, w := range []string{
		"  on " + f.path + ":3:14",
		"     3 │   families = [\n       │              ^\n",
		"     5 │     \"a\",\n       │     ^^^^\n",
		"     6 │   ]\n       │   ^\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteDiagnosticsError(t *testing.T) {
	err := WriteDiagnostics(failingWriter{}, nil, hcl.Diagnostics{{Summary: "x"}})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err = %v, want the writer's error", err)
	}
}

func TestFormatDiagnostic(t *testing.T) {
	rng := &hcl.Range{Filename: "host.hcl", Start: hcl.Pos{Line: 7, Column: 13, Byte: 80}}
	tests := []struct {
		d    *hcl.Diagnostic
		want string
	}{
		{&hcl.Diagnostic{Summary: "Plugin not found", Detail: "No file\n  at /x.", Subject: rng}, "host.hcl:7:13: Plugin not found: No file at /x."},
		{&hcl.Diagnostic{Summary: "Plugin not found", Subject: rng}, "host.hcl:7:13: Plugin not found"},
		{&hcl.Diagnostic{Summary: "Cannot read", Detail: "Gone."}, "Cannot read: Gone."},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := FormatDiagnostic(tt.d); got != tt.want {
			t.Errorf("FormatDiagnostic = %q, want %q", got, tt.want)
		}
	}
}
