package config

import (
	"strings"
	"testing"
)

// direct_channels switches the direct channels off; anything but a bool is
// an error where it is written.
func TestDirectChannelsAttribute(t *testing.T) {
	f := newFixture(t, "host {\n  direct_channels = false\n}\n")
	cfg, diags := NewLoader().Load(f.path)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.Host.DirectChannels {
		t.Fatal("direct_channels = false left them on")
	}
	f = newFixture(t, "host {\n  direct_channels = \"sometimes\"\n}\n")
	_, diags = NewLoader().Load(f.path)
	d := findDiag(diags, "Unsuitable value type")
	if d == nil {
		t.Fatalf("no diagnostic for a string: %v", summaries(diags))
	}
	if at := FormatRange(*d.Subject); at != f.dir+"/host.hcl:2:21" {
		t.Errorf("at %s", at)
	}
}

// direct_calls keeps packs' calls to one capability on the routed path;
// it is on by default, and anything but a bool is an error where it is
// written.
func TestDirectCallsAttribute(t *testing.T) {
	f := newFixture(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n}\ncapability \"other\" {\n  plugin = \"wophost-kv\"\n  direct_calls = false\n}\n")
	cfg, diags := NewLoader().Load(f.path)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if !cfg.Capabilities[0].DirectCalls || cfg.Capabilities[1].DirectCalls {
		t.Fatalf("direct_calls: %v, %v; want the default on and false off", cfg.Capabilities[0].DirectCalls, cfg.Capabilities[1].DirectCalls)
	}
	f = newFixture(t, "capability \"kv\" {\n  plugin = \"wophost-kv\"\n  direct_calls = 3\n}\n")
	_, diags = NewLoader().Load(f.path)
	d := findDiag(diags, "Unsuitable value type")
	if d == nil {
		t.Fatalf("no diagnostic for a number: %v", summaries(diags))
	}
	if at := FormatRange(*d.Subject); at != f.dir+"/host.hcl:3:18" {
		t.Errorf("at %s", at)
	}
}

// direct_max_unread_bytes is at least max_message_bytes, twice it by
// default; below it is an error where it is written.
func TestDirectMaxUnreadBytesAttribute(t *testing.T) {
	f := newFixture(t, "host {\n  max_message_bytes = 1048576\n  direct_max_unread_bytes = 1048576\n}\n")
	cfg, diags := NewLoader().Load(f.path)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.Host.DirectMaxUnreadBytes != 1<<20 {
		t.Fatalf("direct_max_unread_bytes = %d, want the max_message_bytes it was set to", cfg.Host.DirectMaxUnreadBytes)
	}
	f = newFixture(t, "host {\n  max_message_bytes = 1048576\n}\n")
	if cfg, diags = NewLoader().Load(f.path); diags.HasErrors() || cfg.Host.DirectMaxUnreadBytes != 2<<20 {
		t.Fatalf("default %d, want twice max_message_bytes: %s", cfg.Host.DirectMaxUnreadBytes, FormatDiagnostics(diags))
	}
	f = newFixture(t, "host {\n  max_message_bytes = 1048576\n  direct_max_unread_bytes = 1048575\n}\n")
	_, diags = NewLoader().Load(f.path)
	if !diags.HasErrors() {
		t.Fatal("one byte under max_message_bytes was taken")
	}
	d := diags[0]
	if at := FormatRange(*d.Subject); at != f.dir+"/host.hcl:3:29" || !strings.Contains(d.Detail, "1048576") {
		t.Errorf("%s at %s: %s", d.Summary, at, d.Detail)
	}
}
