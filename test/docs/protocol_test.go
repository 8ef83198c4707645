package docs_test

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// protocolPath is the wire document for plugins in any language.
const protocolPath = "docs/protocol.md"

// nodeExample is the example plugin whose source the document quotes.
const nodeExample = "examples/plugins/node-greeter"

// handshakeGrammar is the handshake line of a plugin speaking protocol 1
// over gRPC: core version, app version, network, address, protocol, and
// the certificate in unpadded standard base64 (or nothing).
var handshakeGrammar = regexp.MustCompile(`^1\|1\|(unix|tcp)\|([^|\s]+)\|grpc\|([A-Za-z0-9+/]*)$`)

// goPluginTimestamp is the layout go-plugin parses a log line's
// @timestamp with; a line whose timestamp does not parse loses its level.
const goPluginTimestamp = "2006-01-02T15:04:05.000000Z07:00"

// TestProtocolCodeBlocks checks every fenced block of docs/protocol.md
// against what it shows: a handshake line against the grammar and the
// certificate rules, a proto or JavaScript snippet against the file it is
// quoted from, a log line against go-plugin's parser, the config schema
// against the SDK's type, the go.mod lines against the host's own, the
// Python protoc line against the proto files (and, with grpc_tools, by
// running it).
func TestProtocolCodeBlocks(t *testing.T) {
	root := moduleRoot(t)
	protos := readTree(t, root, "sdk/proto", ".proto")
	example := readTree(t, root, nodeExample, "")
	seen := map[string]int{}
	for _, b := range fencedBlocks(t, root, protocolPath) {
		at := protocolPath + ":" + strconv.Itoa(b.line)
		seen[b.lang]++
		switch b.lang {
		case "handshake":
			checkHandshakeLine(t, at, b.text)
		case "proto":
			if !containsVerbatim(protos, b.text) {
				t.Errorf("%s: the proto block is in no file under sdk/proto:\n%s", at, b.text)
			}
		case "js", "sh":
			if !containsVerbatim(example, b.text) {
				t.Errorf("%s: the %s block is not quoted verbatim from %s:\n%s", at, b.lang, nodeExample, b.text)
			}
		case "json":
			checkJSONBlock(t, at, b.text)
		case "gomod":
			checkGoMod(t, root, at, b.text)
		case "protoc":
			checkPythonProtoc(t, root, at, b.text)
		default:
			t.Errorf("%s: a %q block, which no test checks; use handshake, proto, js, sh, json, gomod or protoc", at, b.lang)
		}
	}
	for _, lang := range []string{"handshake", "proto", "js", "sh", "json", "gomod", "protoc"} {
		if seen[lang] == 0 {
			t.Errorf("%s has no %s block; the check of that kind checked nothing", protocolPath, lang)
		}
	}
}

// checkHandshakeLine parses one example line and checks its certificate
// as the host will: unpadded base64 of DER, a self-signed certificate for
// localhost. The example is one whose padded form the host refuses, which
// is the mistake the document warns of.
func checkHandshakeLine(t *testing.T, at, text string) {
	t.Helper()
	m := handshakeGrammar.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		t.Errorf("%s: %q does not match the handshake grammar", at, text)
		return
	}
	if m[1] == "unix" && !filepath.IsAbs(m[2]) {
		t.Errorf("%s: a unix address must be an absolute path, not %q", at, m[2])
	}
	der, err := base64.RawStdEncoding.DecodeString(m[3])
	if err != nil {
		t.Errorf("%s: the certificate field does not decode as go-plugin decodes it: %v", at, err)
		return
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Errorf("%s: the certificate field is not DER: %v", at, err)
		return
	}
	if err := cert.VerifyHostname("localhost"); err != nil {
		t.Errorf("%s: %v", at, err)
	}
	if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
		t.Errorf("%s: the certificate is not self-signed: %v", at, err)
	}
	padded := base64.StdEncoding.EncodeToString(der)
	if _, err := base64.RawStdEncoding.DecodeString(padded); err == nil {
		t.Errorf("%s: the example's padded form (%d-byte DER) decodes too; pick one whose length is not a multiple of 3", at, len(der))
	}
}

// checkJSONBlock checks a JSON block: valid, and, when it is a log line
// or a config schema, as the host reads it.
func checkJSONBlock(t *testing.T, at, text string) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		t.Errorf("%s: not a JSON object: %v", at, err)
		return
	}
	switch {
	case obj["@level"] != nil:
		level, _ := obj["@level"].(string)
		if l := hclog.LevelFromString(level); l == hclog.NoLevel || l == hclog.Off {
			t.Errorf("%s: @level %q is not a level the host keeps", at, level)
		}
		if _, ok := obj["@message"].(string); !ok {
			t.Errorf("%s: the log line has no @message string", at)
		}
		ts, _ := obj["@timestamp"].(string)
		if _, err := time.Parse(goPluginTimestamp, ts); err != nil {
			t.Errorf("%s: go-plugin cannot parse the @timestamp %q: %v", at, ts, err)
		}
	case obj["attributes"] != nil || obj["blocks"] != nil:
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		var b schema.Block
		if err := dec.Decode(&b); err != nil {
			t.Errorf("%s: not the JSON form of schema.Block: %v", at, err)
			return
		}
		if vs := b.CheckDeclarations(); len(vs) > 0 {
			t.Errorf("%s: the schema is invalid: %v", at, vs[0].Err)
		}
	default:
		t.Errorf("%s: a JSON block that is neither a log line nor a config schema, which nothing checks", at)
	}
}

// checkGoMod checks that the go.mod lines require and replace the SDK
// module as the host's own go.mod does.
func checkGoMod(t *testing.T, root, at, text string) {
	t.Helper()
	sdkMod, err := os.ReadFile(filepath.Join(root, "sdk", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(sdkMod), "\n", 2)[0], "module"))
	hostMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	require := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + ` (v\S+)\s*$`)
	want := require.FindStringSubmatch(string(hostMod))
	got := require.FindStringSubmatch(text)
	if want == nil || got == nil || got[1] != want[1] {
		t.Errorf("%s: the block must require %s at the version the host's go.mod does (%v); it has %v", at, module, want, got)
	}
	replace := regexp.MustCompile(`(?m)^replace ` + regexp.QuoteMeta(module) + ` => \S+/sdk$`)
	if !replace.MatchString(text) || !replace.MatchString(string(hostMod)) {
		t.Errorf("%s: the block must replace %s with a checkout's sdk directory, as the host's go.mod does", at, module)
	}
}

// grpcCodeNames are gRPC's canonical names of the codes the table uses,
// as its specification spells them (grpc-go's String spells Canceled).
var grpcCodeNames = map[string]codes.Code{
	"CANCELLED": codes.Canceled, "UNKNOWN": codes.Unknown, "INVALID_ARGUMENT": codes.InvalidArgument,
	"DEADLINE_EXCEEDED": codes.DeadlineExceeded, "NOT_FOUND": codes.NotFound, "PERMISSION_DENIED": codes.PermissionDenied,
	"FAILED_PRECONDITION": codes.FailedPrecondition, "INTERNAL": codes.Internal, "UNAVAILABLE": codes.Unavailable,
}

// TestProtocolErrorCodeTable checks the document's table of envelope codes
// and gRPC statuses against the SDK's conversion, row by row.
func TestProtocolErrorCodeTable(t *testing.T) {
	root := moduleRoot(t)
	src, err := os.ReadFile(filepath.Join(root, protocolPath))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_.]+)`(?: \\([^|]*\\))? \\| `([A-Z_]+)` \\((\\d+)\\) \\|$")
	other := regexp.MustCompile("(?m)^\\| any other \\(`([a-z_.]+)`.*\\| `UNKNOWN` \\(2\\) \\|$")
	rows := row.FindAllStringSubmatch(string(src), -1)
	if len(rows) < 9 {
		t.Fatalf("found %d rows of the error code table; the pattern no longer matches the document", len(rows))
	}
	check := func(code string, want codes.Code) {
		got := status.Code(hostwire.ToStatus(wop.Errorf(code, "x")))
		if got != want {
			t.Errorf("%s: the document says gRPC %v, the SDK sends %v", code, want, got)
		}
	}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[3])
		if c, ok := grpcCodeNames[r[2]]; !ok || c != codes.Code(n) {
			t.Errorf("%s: %s is not gRPC code %d (%v)", r[1], r[2], n, codes.Code(n))
		}
		check(r[1], codes.Code(n))
	}
	m := other.FindStringSubmatch(string(src))
	if m == nil {
		t.Fatal("the table's row for any other code is missing")
	}
	check(m[1], codes.Unknown)
	for _, c := range wop.CoreCodes() {
		listed := slices.ContainsFunc(rows, func(r []string) bool { return r[1] == c })
		if got := status.Code(hostwire.ToStatus(wop.Errorf(c, "x"))); got != codes.Unknown && !listed {
			t.Errorf("the table leaves out %s, which travels as %v", c, got)
		}
	}
}

// TestProtocolHandshakeValues checks the handshake values the document
// gives against the SDK's.
func TestProtocolHandshakeValues(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), protocolPath))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	for _, want := range []string{
		"| `" + hostwire.Handshake.MagicCookieKey + "` | `" + hostwire.Handshake.MagicCookieValue + "`",
		"| `PLUGIN_PROTOCOL_VERSIONS` | `" + strconv.Itoa(hostwire.ProtocolVersion) + "`",
		"| `" + hostwire.EnvTLSFD + "` |",
		"**The protocol version is " + strconv.Itoa(hostwire.ProtocolVersion) + "**",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("%s does not say %q", protocolPath, want)
		}
	}
}

// TestThirdPartyProtosAreGoPlugins checks that the go-plugin files
// published under sdk/proto/thirdparty are those of the go-plugin module
// the SDK builds with, byte for byte.
func TestThirdPartyProtosAreGoPlugins(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/hashicorp/go-plugin")
	cmd.Dir = filepath.Join(root, "sdk")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("locate the go-plugin module: %v", err)
	}
	for _, name := range []string{"grpc_broker.proto", "grpc_controller.proto", "grpc_stdio.proto"} {
		want, err := os.ReadFile(filepath.Join(dir, "internal", "plugin", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, "sdk/proto/thirdparty/hashicorp/go-plugin", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("sdk/proto/thirdparty/hashicorp/go-plugin/%s differs from go-plugin's %s: copy it again", name, dir)
		}
	}
}

// readTree reads the files under rel whose names end in suffix (every
// file for ""), leaving out node_modules.
func readTree(t *testing.T, root, rel, suffix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(filepath.Join(root, rel), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, suffix) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = string(b)
		return nil
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("read %s: %v (%d files)", rel, err, len(out))
	}
	return out
}

// containsVerbatim reports whether one of files holds text.
func containsVerbatim(files map[string]string, text string) bool {
	if strings.TrimSpace(text) == "" {
		return false
	}
	for _, src := range files {
		if strings.Contains(src, text) {
			return true
		}
	}
	return false
}

// TestNodeExampleReadmeConfig loads each hcl block of the Node example's
// README as a config at the repository's root, where the README says it
// goes, so the block names the launcher where it is.
func TestNodeExampleReadmeConfig(t *testing.T) {
	root := moduleRoot(t)
	readme := nodeExample + "/README.md"
	n := 0
	for _, b := range fencedBlocks(t, root, readme) {
		at := readme + ":" + strconv.Itoa(b.line)
		if b.lang != "hcl" {
			t.Errorf("%s: a %q block, which no test checks", at, b.lang)
			continue
		}
		n++
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "host.hcl")
		if err := os.WriteFile(path, []byte(b.text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, _, diags := config.Load(path)
		if diags.HasErrors() {
			t.Errorf("%s: %s", at, config.FormatDiagnostics(diags))
			continue
		}
		for _, c := range cfg.Capabilities {
			if fi, err := os.Stat(c.PluginPath); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s: capability %q names %s, which is no executable in the repository (%v)", at, c.Name, c.Plugin, err)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s has no hcl block", readme)
	}
}

// checkoutVar is how the Python protoc line names the wophost checkout.
const checkoutVar = "$WOPHOST"

// checkPythonProtoc checks the grpc_tools command line of text: every
// include directory is a directory of the checkout under one package
// prefix that is no package grpcio or protobuf has (grpc, google), and the
// files it names are every proto file under sdk/proto. Where python3 has
// grpc_tools and grpcio, it runs the line in a temporary directory and
// imports every module it wrote beside grpcio's grpc; elsewhere that part
// skips with one line (WOPHOST_TEST_PYTHON=1 makes it a failure).
func checkPythonProtoc(t *testing.T, root, at, text string) {
	t.Helper()
	words := strings.Fields(strings.ReplaceAll(text, "\\\n", " "))
	if len(words) < 3 || strings.Join(words[:3], " ") != "python3 -m grpc_tools.protoc" {
		t.Errorf("%s: the block is no python3 -m grpc_tools.protoc line:\n%s", at, text)
		return
	}
	prefix := ""
	var dirs, protos []string
	for _, w := range words[3:] {
		switch {
		case strings.HasPrefix(w, "-I"):
			p, dir, ok := strings.Cut(strings.TrimPrefix(w, "-I"), "=")
			if !ok || !strings.HasPrefix(dir, checkoutVar+"/") {
				t.Errorf("%s: %s is no -IPREFIX=%s/DIR", at, w, checkoutVar)
				continue
			}
			if prefix != "" && p != prefix {
				t.Errorf("%s: two package prefixes, %s and %s", at, prefix, p)
			}
			prefix = p
			dir = filepath.Join(root, strings.TrimPrefix(dir, checkoutVar+"/"))
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Errorf("%s: %s is no directory of the checkout (%v)", at, w, err)
			}
			dirs = append(dirs, dir)
		case strings.HasSuffix(w, ".proto"):
			protos = append(protos, w)
		case w == "--python_out=." || w == "--grpc_python_out=.":
		default:
			t.Errorf("%s: %q, which the check does not know", at, w)
		}
	}
	if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(prefix) || prefix == "grpc" || prefix == "google" {
		t.Errorf("%s: the package prefix %q is no Python package name of its own", at, prefix)
	}
	// Every proto file of the protocol is named, and each once, where an
	// include directory has it.
	want := map[string]bool{}
	for path := range readTree(t, root, "sdk/proto", ".proto") {
		want[path] = true
	}
	var modules []string
	for _, p := range protos {
		rel, ok := strings.CutPrefix(p, prefix+"/")
		found := ""
		for _, dir := range dirs {
			if _, err := os.Stat(filepath.Join(dir, rel)); ok && err == nil && found == "" {
				found = filepath.Join(dir, rel)
			}
		}
		if found == "" || !want[found] {
			t.Errorf("%s: %s is no proto file of sdk/proto under the prefix %s, or it is named twice", at, p, prefix)
			continue
		}
		delete(want, found)
		mod := strings.ReplaceAll(strings.TrimSuffix(p, ".proto"), "-", "_")
		mod = strings.ReplaceAll(mod, "/", ".")
		modules = append(modules, mod+"_pb2", mod+"_pb2_grpc")
	}
	for path := range want {
		t.Errorf("%s: the line leaves out %s", at, path)
	}
	if t.Failed() {
		return
	}

	t.Run("python", func(t *testing.T) {
		skip := t.Skipf
		if os.Getenv("WOPHOST_TEST_PYTHON") == "1" {
			skip = t.Fatalf
		}
		// The python3 on PATH, else the system's (where Debian's
		// python3-grpc-tools puts them), taken as the line's python3.
		python := ""
		for _, cand := range []string{"python3", "/usr/bin/python3"} {
			if exec.Command(cand, "-c", "import grpc, grpc_tools.protoc").Run() == nil {
				python = cand
				break
			}
		}
		if python == "" {
			skip("no python3 here has grpcio and grpc_tools (Debian: python3-grpc-tools); the protoc line of %s is not run", at)
		}
		python, err := exec.LookPath(python)
		if err != nil {
			t.Fatal(err)
		}
		bin := t.TempDir()
		if err := os.Symlink(python, filepath.Join(bin, "python3")); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cmd := exec.Command("bash", "-c", text)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "WOPHOST="+root, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: the line fails: %v\n%s", at, err, out)
		}
		// Every module it wrote imports, and grpc is still grpcio's.
		script := "import grpc, importlib, sys\n" +
			"assert not grpc.__file__.startswith(sys.argv[1]), grpc.__file__\n" +
			"for m in sys.argv[2:]:\n    importlib.import_module(m)\n"
		py := exec.Command(python, append([]string{"-c", script, dir}, modules...)...)
		py.Dir = dir
		if out, err := py.CombinedOutput(); err != nil {
			t.Errorf("%s: the modules written do not import beside grpcio: %v\n%s", at, err, out)
		}
	})
}
