package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// sandboxOf returns s without its range, for comparing policies.
func sandboxOf(s Sandbox) Sandbox {
	s.DefRange = hcl.Range{}
	return s
}

func TestSandboxHostBlock(t *testing.T) {
	f := newFixture(t, `
host {
  require_sandbox = true
  sandbox {
    enabled     = true
    allow       = ["net.outbound", "clock", "net.dns"]
    memory      = "1GiB"
    processes   = 128
    read_paths  = ["/etc/ssl/", "/usr/share/zoneinfo", "/etc/./ssl"]
    write_paths = ["/var/cache/acme"]
    run_as      = "wophost:wophost"
  }
}
`)
	cfg, _ := mustLoad(t, f)
	if !cfg.Host.RequireSandbox {
		t.Error("RequireSandbox = false, want true")
	}
	want := Sandbox{
		Enabled:     true,
		Allow:       []string{"clock", "net.dns", "net.outbound"},
		MemoryBytes: 1 << 30,
		Processes:   128,
		ReadPaths:   []string{"/etc/ssl", "/usr/share/zoneinfo"},
		WritePaths:  []string{"/var/cache/acme"},
		RunAs:       "wophost:wophost",
	}
	if got := sandboxOf(cfg.Host.Sandbox); !reflect.DeepEqual(got, want) {
		t.Errorf("Host.Sandbox = %+v, want %+v", got, want)
	}
	assertPos(t, "Host.Sandbox.DefRange", cfg.Host.Sandbox.DefRange, f.path, 4, 3)
}

func TestSandboxDefaults(t *testing.T) {
	want := Sandbox{Enabled: true, MemoryBytes: 512 << 20, Processes: 64}
	if got := DefaultSandbox(); !reflect.DeepEqual(got, want) {
		t.Fatalf("DefaultSandbox() = %+v, want %+v", got, want)
	}
	// No host block: packs and the host get the defaults, with no range.
	cfg, _ := mustLoad(t, newFixture(t, "pack \"p\" {\n  path = \"./packs/demo\"\n}\n"))
	if !reflect.DeepEqual(cfg.Host.Sandbox, want) || cfg.Host.RequireSandbox {
		t.Errorf("Host sandbox without a host block = %+v, require %v", cfg.Host.Sandbox, cfg.Host.RequireSandbox)
	}
	if p := cfg.Packs[0]; !reflect.DeepEqual(p.Sandbox, want) || p.RequireSandbox {
		t.Errorf("pack sandbox without any block = %+v, require %v", p.Sandbox, p.RequireSandbox)
	}
	// An empty block is the defaults, at the block.
	f := newFixture(t, "host {\n  sandbox {}\n}\n")
	cfg, _ = mustLoad(t, f)
	if got := sandboxOf(cfg.Host.Sandbox); !reflect.DeepEqual(got, want) {
		t.Errorf("empty sandbox block = %+v, want %+v", got, want)
	}
	assertPos(t, "empty block's DefRange", cfg.Host.Sandbox.DefRange, f.path, 2, 3)
}

// A pack's block replaces the host's value of each attribute it sets, and
// only those; a pack without a block has the host's policy as it is.
func TestSandboxPackInheritsFromHost(t *testing.T) {
	f := newFixture(t, `
host {
  require_sandbox = true
  sandbox {
    allow      = ["net.outbound"]
    memory     = "256MiB"
    processes  = 32
    read_paths = ["/etc/ssl"]
    run_as     = "nobody"
  }
}

pack "plain" {
  path = "./packs/demo"
}

pack "tuned" {
  path            = "./packs/demo"
  require_sandbox = false
  sandbox {
    enabled = false
    allow   = ["subprocess", "fs.write"]
    run_as  = ""
  }
}

pack "none" {
  path = "./packs/demo"
  sandbox {
    allow      = []
    read_paths = []
  }
}
`)
	cfg, _ := mustLoad(t, f)
	host := Sandbox{
		Enabled: true, Allow: []string{"net.outbound"}, MemoryBytes: 256 << 20, Processes: 32,
		ReadPaths: []string{"/etc/ssl"}, RunAs: "nobody",
	}
	if got := sandboxOf(cfg.Host.Sandbox); !reflect.DeepEqual(got, host) {
		t.Fatalf("Host.Sandbox = %+v, want %+v", got, host)
	}
	plain, tuned, none := cfg.Packs[0], cfg.Packs[1], cfg.Packs[2]

	if !reflect.DeepEqual(plain.Sandbox, cfg.Host.Sandbox) || !plain.RequireSandbox {
		t.Errorf("plain = %+v require %v, want the host's %+v require true", plain.Sandbox, plain.RequireSandbox, cfg.Host.Sandbox)
	}
	assertPos(t, "plain's DefRange (the host's block)", plain.Sandbox.DefRange, f.path, 4, 3)

	wantTuned := host
	wantTuned.Enabled = false
	wantTuned.Allow = []string{"fs.write", "subprocess"}
	wantTuned.RunAs = ""
	if got := sandboxOf(tuned.Sandbox); !reflect.DeepEqual(got, wantTuned) || tuned.RequireSandbox {
		t.Errorf("tuned = %+v require %v, want %+v require false", got, tuned.RequireSandbox, wantTuned)
	}
	assertPos(t, "tuned's DefRange", tuned.Sandbox.DefRange, f.path, 20, 3)

	wantNone := host
	wantNone.Allow, wantNone.ReadPaths = nil, nil
	if got := sandboxOf(none.Sandbox); !reflect.DeepEqual(got, wantNone) {
		t.Errorf("none = %+v, want %+v (empty lists replace the host's)", got, wantNone)
	}

	// The packs' lists are their own.
	plain.Sandbox.Allow[0] = "crypto"
	if cfg.Host.Sandbox.Allow[0] != "net.outbound" {
		t.Error("a pack's allow shares its array with the host's")
	}
}

// A capability is contained only with a sandbox block of its own, which
// starts from the built-in defaults, not from the host's.
func TestSandboxCapability(t *testing.T) {
	f := newFixture(t, `
host {
  sandbox {
    memory    = "64MiB"
    processes = 16
    allow     = ["net.dns"]
  }
}

capability "bare" {
  plugin = "wophost-kv"
}

capability "contained" {
  plugin = "wophost-kv"
  sandbox {}
}

capability "tuned" {
  plugin = "wophost-kv"
  sandbox {
    allow       = ["net.outbound"]
    write_paths = ["/var/lib/acme"]
  }
}
`)
	cfg, _ := mustLoad(t, f)
	bare, contained, tuned := cfg.Capabilities[0], cfg.Capabilities[1], cfg.Capabilities[2]
	if bare.Sandbox != nil {
		t.Errorf("bare.Sandbox = %+v, want nil", *bare.Sandbox)
	}
	if contained.Sandbox == nil {
		t.Fatal("contained.Sandbox = nil")
	}
	if got := sandboxOf(*contained.Sandbox); !reflect.DeepEqual(got, DefaultSandbox()) {
		t.Errorf("contained = %+v, want the defaults %+v", got, DefaultSandbox())
	}
	assertPos(t, "contained's DefRange", contained.Sandbox.DefRange, f.path, 16, 3)
	want := DefaultSandbox()
	want.Allow, want.WritePaths = []string{"net.outbound"}, []string{"/var/lib/acme"}
	if tuned.Sandbox == nil || !reflect.DeepEqual(sandboxOf(*tuned.Sandbox), want) {
		t.Errorf("tuned = %+v, want %+v", tuned.Sandbox, want)
	}
}

func TestSandboxMemoryForms(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int64
	}{
		{`16777216`, 16 << 20},
		{`"16777216"`, 16 << 20},
		{`"16MiB"`, 16 << 20},
		{`"16384KiB"`, 16 << 20},
		{`"1536MiB"`, 1536 << 20},
		{`"2GiB"`, 2 << 30},
		{`"1TiB"`, 1 << 40},
		{`1099511627776`, 1 << 40},
		{`"1024GiB"`, 1 << 40},
	} {
		t.Run(tc.value, func(t *testing.T) {
			cfg, _ := mustLoad(t, newFixture(t, "host {\n  sandbox {\n    memory = "+tc.value+"\n  }\n}\n"))
			if got := cfg.Host.Sandbox.MemoryBytes; got != tc.want {
				t.Errorf("memory = %s: %d bytes, want %d", tc.value, got, tc.want)
			}
		})
	}
}

func TestSandboxRunAsForms(t *testing.T) {
	for _, v := range []string{"", "nobody", "wophost:wophost", "65534:65534", "1000", "_svc-acme.1:staff", "4294967294:0"} {
		t.Run(v, func(t *testing.T) {
			cfg, _ := mustLoad(t, newFixture(t, "host {\n  sandbox {\n    run_as = \""+v+"\"\n  }\n}\n"))
			if got := cfg.Host.Sandbox.RunAs; got != v {
				t.Errorf("RunAs = %q, want %q", got, v)
			}
		})
	}
}

func TestSandboxDiagnostics(t *testing.T) {
	// The attribute's value starts at column 5 + len(name) + 3.
	block := func(body string) string { return "host {\n  sandbox {\n    " + body + "\n  }\n}\n" }
	for _, tc := range []struct {
		name, src, summary, detail string
		line, col                  int
	}{
		{"unknown token", block(`allow = ["net.outbond"]`), "Invalid allow",
			`"net.outbond" is not a runtime requirement; the requirements are net.dns, net.outbound, crypto, subprocess, fs.read, fs.write, env.read, clock`, 3, 14},
		{"second token unknown", block(`allow = ["clock", "net.inbound"]`), "Invalid allow", `"net.inbound" is not a runtime requirement`, 3, 23},
		{"repeated token", block(`allow = ["clock", "clock"]`), "Invalid allow", `"clock" is listed more than once`, 3, 23},
		{"allow not a list", block(`allow = "clock"`), "Unsuitable value type", "", 3, 13},
		{"decimal unit", block(`memory = "512MB"`), "Invalid memory",
			`memory must be a whole number of bytes, or a string "N", "NKiB", "NMiB", "NGiB" or "NTiB" (binary units: 1 MiB is 1048576 bytes); got "512MB"`, 3, 14},
		{"lowercase unit", block(`memory = "512mib"`), "Invalid memory", `got "512mib"`, 3, 14},
		{"space before unit", block(`memory = "512 MiB"`), "Invalid memory", `got "512 MiB"`, 3, 14},
		{"unit alone", block(`memory = "MiB"`), "Invalid memory", `got "MiB"`, 3, 14},
		{"negative string", block(`memory = "-512MiB"`), "Invalid memory", `got "-512MiB"`, 3, 14},
		{"empty", block(`memory = ""`), "Invalid memory", `got ""`, 3, 14},
		{"fraction", block(`memory = 16777216.5`), "Invalid memory", "got 16777216.5", 3, 14},
		{"bool", block(`memory = true`), "Invalid memory", "got a value of type bool", 3, 14},
		{"a byte below the least", block(`memory = 16777215`), "Invalid memory",
			"memory must be between 16MiB (16777216 bytes) and 1TiB (1099511627776 bytes); got 16777215", 3, 14},
		{"a KiB below the least", block(`memory = "16383KiB"`), "Invalid memory", `got "16383KiB" (16776192 bytes)`, 3, 14},
		{"a byte above the most", block(`memory = 1099511627777`), "Invalid memory", "between 16MiB", 3, 14},
		{"a GiB above the most", block(`memory = "1025GiB"`), "Invalid memory", "between 16MiB", 3, 14},
		{"overflow", block(`memory = "99999999999999999999TiB"`), "Invalid memory", "between 16MiB", 3, 14},
		{"huge number", block(`memory = 1e30`), "Invalid memory", "between 16MiB", 3, 14},
		{"negative", block(`memory = -16777216`), "Invalid memory", "between 16MiB", 3, 14},
		{"too few processes", block(`processes = 7`), "Invalid processes", "between 8 and 65536; got 7", 3, 17},
		{"too many processes", block(`processes = 65537`), "Invalid processes", "between 8 and 65536; got 65537", 3, 17},
		{"relative read path", block(`read_paths = ["/etc/ssl", "etc/hosts"]`), "Invalid read_paths", `read_paths must hold absolute paths; got "etc/hosts"`, 3, 31},
		{"empty read path", block(`read_paths = [""]`), "Invalid read_paths", `got ""`, 3, 19},
		{"relative write path", block(`write_paths = ["./cache"]`), "Invalid write_paths", `write_paths must hold absolute paths; got "./cache"`, 3, 20},
		{"root writable", block(`write_paths = ["/"]`), "Invalid write_paths", `write_paths must not hold "/"`, 3, 20},
		{"root writable, spelt long", block(`write_paths = ["/tmp/.."]`), "Invalid write_paths", `must not hold "/tmp/.."`, 3, 20},
		{"empty group", block(`run_as = "nobody:"`), "Invalid run_as", `with neither part empty; got "nobody:"`, 3, 14},
		{"empty user", block(`run_as = ":nogroup"`), "Invalid run_as", "neither part empty", 3, 14},
		{"two colons", block(`run_as = "a:b:c"`), "Invalid run_as", `with at most one colon; got "a:b:c"`, 3, 14},
		{"space", block(`run_as = "no body"`), "Invalid run_as", "must not hold spaces", 3, 14},
		{"trailing space", block(`run_as = "nobody "`), "Invalid run_as", "must not hold spaces", 3, 14},
		{"id too large", block(`run_as = "1000:4294967295"`), "Invalid run_as", "holds the id 4294967295", 3, 14},
		{"enabled not a bool", block(`enabled = 1`), "Unsuitable value type", "", 3, 15},
		{"unknown setting", block(`network = true`), "Unsupported argument", "", 3, 5},
		{"two blocks", "host {\n  sandbox {}\n  sandbox {}\n}\n", "Duplicate sandbox block", "again at", 3, 3},
		{"require_sandbox not a bool", "host {\n  require_sandbox = \"maybe\"\n}\n", "Unsuitable value type", "", 2, 21},
		{"in a pack", "pack \"p\" {\n  path = \"./packs/demo\"\n  sandbox { processes = 7 }\n}\n", "Invalid processes", "got 7", 3, 25},
		{"two blocks in a pack", "pack \"p\" {\n  path = \"./packs/demo\"\n  sandbox {}\n  sandbox {}\n}\n", "Duplicate sandbox block", "", 4, 3},
		{"pack's require_sandbox", "pack \"p\" {\n  path = \"./packs/demo\"\n  require_sandbox = 1\n}\n", "Unsuitable value type", "", 3, 21},
		{"in a capability", "capability \"c\" {\n  plugin = \"wophost-kv\"\n  sandbox { allow = [\"subprocess\", \"net.outbond\"] }\n}\n", "Invalid allow", `"net.outbond"`, 3, 36},
		{"two blocks in a capability", "capability \"c\" {\n  plugin = \"wophost-kv\"\n  sandbox {}\n  sandbox {}\n}\n", "Duplicate sandbox block", "", 4, 3},
		{"no require_sandbox in a capability", "capability \"c\" {\n  plugin = \"wophost-kv\"\n  require_sandbox = true\n}\n", "Unsupported argument", "", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.src)
			_, diags := NewLoader().Load(f.path)
			d := findDiag(diags, tc.summary)
			if d == nil {
				t.Fatalf("no %q diagnostic in %v", tc.summary, summaries(diags))
			}
			if !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", d.Detail, tc.detail)
			}
			assertPos(t, tc.summary, *d.Subject, f.path, tc.line, tc.col)
		})
	}
}

// A refused attribute leaves the inherited value, and the pack is
// refused by the diagnostic rather than started with half a policy.
func TestSandboxRefusalKeepsInheritedValue(t *testing.T) {
	f := newFixture(t, `
host {
  sandbox {
    processes = 32
  }
}

pack "p" {
  path = "./packs/demo"
  sandbox {
    processes = 65537
  }
}
`)
	cfg, diags := NewLoader().Load(f.path)
	if !diags.HasErrors() {
		t.Fatal("no error for processes = 65537")
	}
	if got := cfg.Packs[0].Sandbox.Processes; got != 32 {
		t.Errorf("Processes = %d, want the host's 32", got)
	}
}
