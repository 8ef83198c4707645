package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/wophost/wophost/sdk/hostwire"
	wophostv1 "github.com/wophost/wophost/sdk/proto/wophost/v1"
)

// copyExecutable copies src to dst with the given mode, whatever the
// umask.
func copyExecutable(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

// A plugin executable, or its directory, that others may write is refused
// with the path, the mode and the attribute that allows it; setting that
// attribute lets the same plugin load.
func TestWritablePluginIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins")
	plugin := filepath.Join(dir, "testcap")
	copyExecutable(t, bin.testcap, plugin, 0o777)
	for _, tt := range []struct {
		name, path, mode string
		setup            func()
	}{
		{"world-writable binary", plugin, "0777", func() {}},
		{"world-writable directory", dir, "0777", func() {
			if err := os.Chmod(plugin, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup()
			refused := writeConfig(t, fmt.Sprintf("capability \"echo\" {\n  plugin   = %q\n  families = [\"test.echo\"]\n}\n", plugin))
			rec := pluginRecords(t, refused)["echo"]
			if rec.State != "failed" || rec.FailedPhase != "verified" {
				t.Fatalf("record %+v, want failed in phase verified", rec)
			}
			for _, w := range []string{tt.path, tt.mode, "allow_writable = true"} {
				if !strings.Contains(rec.LastError, w) {
					t.Errorf("reason %q does not mention %q", rec.LastError, w)
				}
			}
			// The CLI shows where in the file the refused block is.
			res := runHost(t, "", "--config", refused, "capabilities")
			if !strings.Contains(res.stderr, "host.hcl:2:") || !strings.Contains(res.stderr, "writable") {
				t.Errorf("no file:line diagnostic on stderr:\n%s", res.stderr)
			}

			allowed := writeConfig(t, fmt.Sprintf("capability \"echo\" {\n  plugin         = %q\n  families       = [\"test.echo\"]\n  allow_writable = true\n}\n", plugin))
			if rec := pluginRecords(t, allowed)["echo"]; rec.State != "ready" {
				t.Errorf("with allow_writable = true: %+v, want ready", rec)
			}
		})
	}
}

// The same holds for a pack: its entry executable writable by others is
// refused with pack_validation_failed, unless the pack block allows it.
func TestWritablePackEntryIsRefused(t *testing.T) {
	pack := probePack(t)
	entry := filepath.Join(pack, "probe")
	if err := os.Chmod(entry, 0o777); err != nil {
		t.Fatal(err)
	}
	packs := func(extra string) map[string]struct{ State, Error string } {
		cfg := writeConfig(t, fmt.Sprintf(`
host { plugin_dir = "BIN" }
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack "private.wophost.probe" {
  path = %q
  %s
}
`, pack, extra))
		res := runHost(t, "", "--config", cfg, "--json", "packs")
		var list []struct{ Name, State, Error string }
		if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
			t.Fatalf("host packs: %v\n%s\n%s", err, res.stdout, res.stderr)
		}
		out := map[string]struct{ State, Error string }{}
		for _, p := range list {
			out[p.Name] = struct{ State, Error string }{p.State, p.Error}
		}
		return out
	}
	p := packs("")["private.wophost.probe"]
	if p.State != "refused" || !strings.Contains(p.Error, "pack_validation_failed") ||
		!strings.Contains(p.Error, entry) || !strings.Contains(p.Error, "0777") || !strings.Contains(p.Error, "allow_writable") {
		t.Errorf("writable entry: %+v, want refused with pack_validation_failed naming %s, its mode and allow_writable", p, entry)
	}
	if p := packs("allow_writable = true")["private.wophost.probe"]; p.State == "refused" {
		t.Errorf("with allow_writable = true: %+v, want loaded", p)
	}
}

// file() cannot climb out of the config's directory with "..".
func TestFileFunctionStaysInConfigDir(t *testing.T) {
	cfg := writeConfig(t, "host { plugin_dir = \"BIN\" }\ncapability \"echo\" {\n  plugin   = \"testcap\"\n  families = [\"test.echo\"]\n  config {\n    greeting = file(\"../../../etc/hostname\")\n  }\n}\n")
	res := runHost(t, "", "--config", cfg, "validate")
	if res.code == 0 {
		t.Fatalf("validate accepted a file() outside the config dir:\n%s", res.stdout)
	}
	if !strings.Contains(res.stderr, "host.hcl:6:") || !strings.Contains(res.stderr, "leaves the config file's directory") {
		t.Errorf("want a diagnostic at host.hcl:6 saying the path leaves the config dir:\n%s", res.stderr)
	}
}

// A .prompt whose name would walk out of the store is refused at publish
// and nothing is written outside the store.
func TestPromptNameTraversalIsRefused(t *testing.T) {
	s := newPromptSetup(t)
	for _, name := range []string{"../x", "a/../../x", "/etc/x", `a\..\x`} {
		res := runHost(t, "", "--config", s.cfg, "prompts", "publish", writePrompt(t, "---\nname: "+name+"\n---\nHello.\n"))
		if res.code == 0 {
			t.Errorf("publish of name %q succeeded:\n%s", name, res.stdout)
			continue
		}
		if !strings.Contains(res.stdout+res.stderr, "name") {
			t.Errorf("refusal of %q does not name the field:\n%s%s", name, res.stdout, res.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.store), "x")); err == nil {
		t.Error("a file named x appeared beside the store")
	}
}

// A canary secret that enters through the plugin config, through env()
// and through a provider's error body (which echoes the API key) appears
// nowhere in the host's trace-level JSON logs, its output or the error
// envelope a pack receives.
func TestSecretsNeverReachLogsOrErrors(t *testing.T) {
	const canary = "wophost-canary-7f3a9c"
	const envCanary = "wophost-env-canary-51d2"
	t.Setenv("WOPHOST_TEST_CANARY_KEY", envCanary)
	echoing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s (request %q)","type":"invalid_request_error","code":"invalid_api_key"}}`,
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), body)
	}))
	t.Cleanup(echoing.Close)

	cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  log_level  = "trace"
  log_format = "json"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
  config {
    greeting = "hi"
    token    = %q
  }
}
capability "ai" {
  plugin = %q
  config {
    default_provider = "remote"
    provider "remote" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
      api_key  = env("WOPHOST_TEST_CANARY_KEY")
    }
  }
}
pack "private.wophost.probe" { path = %q }
`, canary, binary(t, "./plugins/aienvelope"), echoing.URL, probePack(t)))

	input := `{"family":"aiEnvelope","method":"generate","payload":{"envelopeType":"t","userMessage":"hello","idempotencyKey":"canary-1"}}`
	res := runHost(t, input, "--config", cfg, "--log-level", "trace", "run", "probe.call", "--input", "-")
	e := decodeEnvelope(t, res)
	if e.Code == "" || e.Message == "" {
		t.Fatalf("no error envelope from the failing provider: %+v", e)
	}
	all := res.stdout + res.stderr + e.Message + string(e.Details)
	for _, secret := range []string{canary, envCanary} {
		if strings.Contains(all, secret) {
			t.Errorf("secret %q leaked:\nstdout: %s\nstderr: %s", secret, res.stdout, res.stderr)
		}
	}
	// The logs really were at trace level and JSON, and the provider was
	// really reached: otherwise the absence of the canary proves nothing.
	if !strings.Contains(res.stderr, `"@level":"trace"`) && !strings.Contains(res.stderr, `"@level":"debug"`) {
		t.Errorf("stderr holds no trace or debug JSON log lines:\n%s", res.stderr)
	}
	if !strings.Contains(e.Message+string(e.Details), "Incorrect API key") && !strings.Contains(res.stderr, "Incorrect API key") {
		t.Errorf("the provider's error never came back (envelope %+v); the test did not exercise the error path", e)
	}
}

// selfSigned returns a TLS certificate no host ever issued.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startTestcapRaw starts testcap as the host would, without a host:
// through hostwire.ClientConfig, with edit applied to the configuration first
// (nil for none). It returns the go-plugin client and the capability
// connection; the process is killed when t ends.
func startTestcapRaw(t *testing.T, level hclog.Level, edit func(*exec.Cmd, *goplugin.ClientConfig)) (*goplugin.Client, *hostwire.CapabilityConn) {
	t.Helper()
	cmd := exec.Command(bin.testcap)
	cmd.Env = hostwire.ProcessEnv("testcap", level, 16<<20)
	cfg, started, err := hostwire.ClientConfig(cmd, hclog.NewNullLogger(), 30*time.Second, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cmd, cfg)
	}
	client := goplugin.NewClient(cfg)
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	started()
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	raw, err := rpc.Dispense(hostwire.KindCapability)
	if err != nil {
		t.Fatal(err)
	}
	return client, raw.(*hostwire.CapabilityConn)
}

// A plugin started the way the host starts it (mutual TLS per launch)
// serves only the host that started it: a client without the host's certificate, with
// another certificate, or without TLS at all, is refused.
func TestMutualTLSRefusesStrangers(t *testing.T) {
	client, conn := startTestcapRaw(t, hclog.Error, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The host's own connection works: the plugin is up and serving.
	if _, err := conn.Client.Describe(ctx, &wophostv1.DescribeRequest{}); err != nil {
		t.Fatalf("the host's own client was refused: %v", err)
	}
	addr := client.ReattachConfig().Addr
	dial := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient("passthrough:///plugin",
			grpc.WithTransportCredentials(creds),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, addr.Network(), addr.String())
			}))
		if err != nil {
			return err
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_, err = wophostv1.NewCapabilityClient(conn).Describe(cctx, &wophostv1.DescribeRequest{})
		return err
	}
	stranger := selfSigned(t)
	for name, creds := range map[string]credentials.TransportCredentials{
		"no TLS":         insecure.NewCredentials(),
		"no certificate": credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}),
		"another certificate": credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, ServerName: "localhost",
			Certificates: []tls.Certificate{stranger}}),
	} {
		if err := dial(creds); err == nil {
			t.Errorf("%s: the plugin answered a client that is not the host", name)
		}
	}
	// The refusals came from the plugin's TLS check, not from a plugin
	// that had gone away.
	if _, err := conn.Client.Describe(ctx, &wophostv1.DescribeRequest{}); err != nil {
		t.Fatalf("the host's own client fails after the strangers: %v", err)
	}
}

// A plugin that does not read the key material the host hands over (one
// built on plain go-plugin, or in another language) falls back to
// go-plugin's AutoMTLS against the host's certificate, and the host
// accepts the certificate it answers with.
func TestGoPluginAutoMTLSStillAccepted(t *testing.T) {
	logs := &strings.Builder{}
	var mu sync.Mutex
	_, conn := startTestcapRaw(t, hclog.Debug, func(cmd *exec.Cmd, cfg *goplugin.ClientConfig) {
		// The process cannot find the descriptor without its variable.
		cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, hostwire.EnvTLSFD+"=") })
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: lockedWriter{&mu, logs}})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Client.Describe(ctx, &wophostv1.DescribeRequest{}); err != nil {
		t.Fatalf("describe over go-plugin's AutoMTLS: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "configuring server automatic mTLS") {
		t.Fatalf("the plugin did not fall back to go-plugin's AutoMTLS; its log:\n%s", logs.String())
	}
}

// lockedWriter serialises writes from go-plugin's log goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
