package config

import (
	"strings"
	"testing"
	"time"
)

func TestHTTPBlock(t *testing.T) {
	t.Setenv("WOPHOST_TEST_TOKEN", "s3cret-canary")
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  http {
    listen           = "0.0.0.0:9000"
    tokens           = [env("WOPHOST_TEST_TOKEN")]
    shutdown_timeout = "5s"
  }
}
`))
	h := cfg.Host.HTTP
	if h == nil || h.Listen != "0.0.0.0:9000" || len(h.Tokens) != 1 || h.Tokens[0] != "s3cret-canary" || h.ShutdownTimeout != 5*time.Second {
		t.Fatalf("http = %+v", h)
	}

	cfg, _ = mustLoad(t, newFixture(t, "host {\n  http {}\n}\n"))
	if h := cfg.Host.HTTP; h == nil || h.Listen != DefaultListen || h.ShutdownTimeout != DefaultShutdownTimeout ||
		h.ReadTimeout != DefaultReadTimeout || h.ReadHeaderTimeout != DefaultReadHeaderTimeout || h.IdleTimeout != DefaultIdleTimeout ||
		h.MaxHeaderBytes != DefaultMaxHeaderBytes || h.MaxConnections != DefaultMaxConnections {
		t.Fatalf("defaults: http = %+v", h)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {\n  http {\n    read_timeout = \"3s\"\n    read_header_timeout = \"1s\"\n    idle_timeout = \"7s\"\n    max_header_bytes = 8192\n    max_connections = 9\n  }\n}\n"))
	if h := cfg.Host.HTTP; h.ReadTimeout != 3*time.Second || h.ReadHeaderTimeout != time.Second || h.IdleTimeout != 7*time.Second ||
		h.MaxHeaderBytes != 8192 || h.MaxConnections != 9 {
		t.Fatalf("limits: http = %+v", h)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if cfg.Host.HTTP != nil {
		t.Fatalf("no http block: http = %+v", cfg.Host.HTTP)
	}
}

func TestHTTPBlockDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		name, src, summary string
		line, col          int
	}{
		{"beyond loopback without a token", "host {\n  http {\n    listen = \":8080\"\n  }\n}\n", "Unauthenticated listener beyond loopback", 3, 14},
		{"bad address", "host {\n  http {\n    listen = \"localhost\"\n  }\n}\n", "Invalid listen", 3, 14},
		{"empty token", "host {\n  http {\n    tokens = [\"\"]\n  }\n}\n", "Empty token", 3, 14},
		{"bad timeout", "host {\n  http {\n    shutdown_timeout = \"soon\"\n  }\n}\n", "Invalid duration", 3, 24},
		{"two blocks", "host {\n  http {}\n  http {}\n}\n", "Duplicate http block", 3, 3},
		{"zero read timeout", "host {\n  http {\n    read_timeout = \"0s\"\n  }\n}\n", "Invalid duration", 3, 20},
		{"header timeout over read timeout", "host {\n  http {\n    read_timeout = \"5s\"\n    read_header_timeout = \"6s\"\n  }\n}\n", "Invalid read_header_timeout", 4, 27},
		{"tiny header limit", "host {\n  http {\n    max_header_bytes = 100\n  }\n}\n", "Invalid max_header_bytes", 3, 24},
		{"no connections", "host {\n  http {\n    max_connections = 0\n  }\n}\n", "Invalid max_connections", 3, 23},
		{"scope one letter short", "host {\n  http {\n    token \"ops\" {\n      value  = \"t-ops\"\n      scopes = [\"runs:al\"]\n    }\n  }\n}\n", "Unknown scope", 5, 16},
		{"scope in capitals", "host {\n  http {\n    token \"ops\" {\n      value  = \"t-ops\"\n      scopes = [\"runs:all\", \"Runs:All\"]\n    }\n  }\n}\n", "Unknown scope", 5, 16},
		{"token block without a value", "host {\n  http {\n    token \"ops\" {\n      scopes = [\"runs:all\"]\n    }\n  }\n}\n", "Missing token value", 3, 5},
		{"empty token block value", "host {\n  http {\n    token \"ops\" {\n      value = \"\"\n    }\n  }\n}\n", "Empty value", 4, 15},
		{"token in the list and a block", "host {\n  http {\n    tokens = [\"t-1\"]\n    token \"ops\" {\n      value = \"t-1\"\n    }\n  }\n}\n", "Token given twice", 5, 15},
		{"two token blocks of one name", "host {\n  http {\n    token \"ops\" {\n      value = \"t-1\"\n    }\n    token \"ops\" {\n      value = \"t-2\"\n    }\n  }\n}\n", "Duplicate token block", 6, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.src)
			_, diags := NewLoader().Load(f.path)
			d := findDiag(diags, tc.summary)
			if d == nil {
				t.Fatalf("no %q diagnostic in %v", tc.summary, summaries(diags))
			}
			assertPos(t, tc.summary, *d.Subject, f.path, tc.line, tc.col)
		})
	}
}

// A token block's token is accepted beside the tokens list's, with its
// scopes; the list's tokens carry none. Neither appears in a diagnostic.
func TestHTTPTokenBlocks(t *testing.T) {
	t.Setenv("WOPHOST_TEST_OPS_TOKEN", "ops-canary")
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  http {
    tokens = ["t-app"]
    token "operator" {
      value  = env("WOPHOST_TEST_OPS_TOKEN")
      scopes = ["runs:all"]
    }
    token "auditor" {
      value = "t-audit"
    }
  }
}
`))
	h := cfg.Host.HTTP
	if strings.Join(h.Tokens, ",") != "t-app,ops-canary,t-audit" {
		t.Errorf("tokens %v", h.Tokens)
	}
	if got := h.TokenScopes["ops-canary"]; len(got) != 1 || got[0] != ScopeAllRuns {
		t.Errorf("operator's scopes %v", got)
	}
	if got, ok := h.TokenScopes["t-audit"]; !ok || len(got) != 0 {
		t.Errorf("auditor's scopes %v (%v)", got, ok)
	}
	if _, ok := h.TokenScopes["t-app"]; ok {
		t.Error("a token of the list has scopes")
	}
	f := newFixture(t, "host {\n  http {\n    token \"ops\" {\n      value  = \"leaky-canary\"\n      scopes = [\"runs:al\"]\n    }\n    token \"dup\" {\n      value = \"leaky-canary\"\n    }\n  }\n}\n")
	_, diags := NewLoader().Load(f.path)
	if !diags.HasErrors() {
		t.Fatal("no error for an unknown scope")
	}
	if text := FormatDiagnostics(diags); strings.Contains(text, "leaky-canary") {
		t.Errorf("a diagnostic shows the token:\n%s", text)
	}
}

func TestHTTPBeyondLoopbackAllowedExplicitly(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, "host {\n  http {\n    listen = \"[::]:8080\"\n    allow_unauthenticated = true\n  }\n}\n"))
	if !cfg.Host.HTTP.AllowUnauthenticated {
		t.Fatal("allow_unauthenticated not decoded")
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:80": true, "[::1]:80": true, "localhost:80": true, "127.5.6.7:1": true,
		":80": false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false, "bad": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
	if strings.Contains(DefaultListen, "0.0.0.0") || !IsLoopback(DefaultListen) {
		t.Errorf("DefaultListen %q must be loopback", DefaultListen)
	}
}

func TestTracingBlock(t *testing.T) {
	cfg, _ := mustLoad(t, newFixture(t, `
host {
  tracing {
    endpoint     = "http://collector:4318/v1/traces"
    protocol     = "http/protobuf"
    insecure     = true
    headers      = { "x-api-key" = "k" }
    sample_ratio = 0.25
    service_name = "edge-host"
  }
}
`))
	tr := cfg.Host.Tracing
	if tr == nil || tr.Endpoint != "http://collector:4318/v1/traces" || tr.Protocol != "http/protobuf" || !tr.Insecure ||
		tr.Headers["x-api-key"] != "k" || tr.SampleRatio != 0.25 || tr.ServiceName != "edge-host" {
		t.Fatalf("tracing = %+v", tr)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {\n  tracing {\n    endpoint = \"localhost:4317\"\n  }\n}\n"))
	if tr := cfg.Host.Tracing; tr.Protocol != "grpc" || tr.SampleRatio != 1 || tr.ServiceName != DefaultServiceName || tr.Insecure {
		t.Fatalf("defaults: %+v", tr)
	}
	cfg, _ = mustLoad(t, newFixture(t, "host {}\n"))
	if cfg.Host.Tracing != nil {
		t.Fatal("tracing on without a tracing block")
	}
}

func TestTracingBlockDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		name, src, summary string
		line, col          int
	}{
		{"no endpoint", "host {\n  tracing {\n  }\n}\n", "Missing required argument", 2, 3},
		{"protocol", "host {\n  tracing {\n    endpoint = \"x:1\"\n    protocol = \"udp\"\n  }\n}\n", "Invalid protocol", 4, 16},
		{"ratio", "host {\n  tracing {\n    endpoint = \"x:1\"\n    sample_ratio = 2\n  }\n}\n", "Invalid sample_ratio", 4, 20},
		{"header", "host {\n  tracing {\n    endpoint = \"x:1\"\n    headers = { \"a b\" = \"c\" }\n  }\n}\n", "Invalid header name", 4, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.src)
			_, diags := NewLoader().Load(f.path)
			d := findDiag(diags, tc.summary)
			if d == nil {
				t.Fatalf("no %q diagnostic in %v", tc.summary, summaries(diags))
			}
			assertPos(t, tc.summary, *d.Subject, f.path, tc.line, tc.col)
		})
	}
}

// The console is on by default on a loopback listener only; the console
// attribute decides either way, and a value that is no bool is an error
// at its position.
func TestHTTPConsole(t *testing.T) {
	t.Setenv("WOPHOST_TEST_TOKEN", "s3cret-canary")
	for _, tc := range []struct {
		body string
		want bool
	}{
		{``, true},
		{`listen = "127.0.0.1:7427"`, true},
		{`listen = "localhost:7427"`, true},
		{`listen = "127.0.0.1:7427"` + "\n    console = false", false},
		{`listen = "0.0.0.0:7427"` + "\n    tokens = [env(\"WOPHOST_TEST_TOKEN\")]", false},
		{`listen = "10.0.0.1:7427"` + "\n    tokens = [env(\"WOPHOST_TEST_TOKEN\")]", false},
		{`listen = "0.0.0.0:7427"` + "\n    tokens = [env(\"WOPHOST_TEST_TOKEN\")]\n    console = true", true},
	} {
		cfg, _ := mustLoad(t, newFixture(t, "host {\n  http {\n    "+tc.body+"\n  }\n}\n"))
		if got := cfg.Host.HTTP.Console; got != tc.want {
			t.Errorf("%q: console %v, want %v", tc.body, got, tc.want)
		}
	}
	if !DefaultHTTP().Console {
		t.Error("no http block: the console is off on the default loopback listener")
	}
	f := newFixture(t, "host {\n  http {\n    console = \"yes\"\n  }\n}\n")
	_, diags := NewLoader().Load(f.path)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "console") {
		t.Fatalf("console = \"yes\": %v", diags)
	}
	assertPos(t, "console", *diags[0].Subject, f.path, 3, 15)
}
