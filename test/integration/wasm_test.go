package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/test/testbin"
)

// wasmPack lays out the WebAssembly test pack at test/packs/NAME, its
// committed module included, in a fresh directory.
func wasmPack(t *testing.T, name string) string {
	t.Helper()
	src := "test/packs/" + name
	dir := filepath.Join(t.TempDir(), name)
	if err := testbin.LayOutPack(src, testbin.SourceDir(src+"/"+name+".wasm"), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wasmRuntimes is the nodePackRuntimes record of the discovery document.
type wasmRuntimes struct {
	NodePackRuntimes *struct {
		Status string `json:"status"`
		Wasm   struct {
			ABIVersions    []int    `json:"abiVersions"`
			MaxMemoryBytes int64    `json:"maxMemoryBytes"`
			LoadedPacks    []string `json:"loadedPacks"`
		} `json:"wasm"`
	} `json:"nodePackRuntimes"`
}

// A module reporting an ABI the host does not serve is refused at load,
// named with both versions, and never listed as loaded; a memory bomb
// that declares no maximum ends its run failed with cap.breached at the
// host's cap, while the host, the same pack's other node and a process
// pack go on serving, also at the same time.
func TestWasmPacksThroughServe(t *testing.T) {
	cfg := serveConfig(t, "", fmt.Sprintf(`
pack "community.wophost.wasmbomb" {
  path = %q
  wasm { max_memory = "32MiB" }
}
pack "community.wophost.wasmabi" { path = %q }
`, wasmPack(t, "wasmbomb"), wasmPack(t, "wasmabi")))
	d := startServe(t, cfg)

	var doc wasmRuntimes
	disc := request(t, "GET", d.base+"/.well-known/openwop", "", nil)
	if err := json.Unmarshal([]byte(disc.body), &doc); err != nil || doc.NodePackRuntimes == nil {
		t.Fatalf("discovery: %v\n%s", err, disc.body)
	}
	validDiscovery(t, []byte(disc.body))
	w := doc.NodePackRuntimes.Wasm
	if len(w.ABIVersions) != 1 || w.ABIVersions[0] != 1 || w.MaxMemoryBytes != 128<<20 ||
		len(w.LoadedPacks) != 1 || w.LoadedPacks[0] != "community.wophost.wasmbomb" {
		t.Fatalf("nodePackRuntimes.wasm = %+v", w)
	}

	var packs []struct {
		Name, State, Error, Runtime string
		Wasm                        *struct {
			MaxMemoryBytes int64 `json:"maxMemoryBytes"`
			Encoding       string
		}
	}
	res := runHost(t, "", "--config", cfg, "--json", "packs")
	if err := json.Unmarshal([]byte(res.stdout), &packs); err != nil {
		t.Fatalf("host packs: %v\n%s%s", err, res.stdout, res.stderr)
	}
	for _, p := range packs {
		switch p.Name {
		case "community.wophost.wasmabi":
			if p.State != "refused" || !strings.Contains(p.Error, "unsupported_abi_version") ||
				!strings.Contains(p.Error, "reports ABI version 999; this host serves 1") || p.Runtime != "wasm" {
				t.Errorf("wasmabi: %+v", p)
			}
		case "community.wophost.wasmbomb":
			if p.State != "ready" || p.Wasm == nil || p.Wasm.MaxMemoryBytes != 32<<20 || p.Wasm.Encoding != "packed-i64" {
				t.Errorf("wasmbomb: %+v", p)
			}
		}
	}
	if r := request(t, "POST", d.base+"/v1/nodes/wasmabi.run:execute", `{"input":{}}`, nil); r.status != 404 {
		t.Errorf("a node of the refused pack: %d %s, want 404", r.status, r.body)
	}

	// The bomb and the pack's echo, and the probe's, at the same time.
	var wg sync.WaitGroup
	replies := make([]reply, 4)
	for i, node := range []string{"wasmbomb.bomb", "wasmbomb.echo", "probe.echo", "wasmbomb.bomb"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = request(t, "POST", d.base+"/v1/nodes/"+node+":execute", `{"input":{"n":7}}`, nil)
		}()
	}
	wg.Wait()
	for _, i := range []int{0, 3} {
		var out struct {
			Status string `json:"status"`
			Error  struct {
				Code    string `json:"code"`
				Details struct {
					Kind     string `json:"kind"`
					Limit    int64  `json:"limit"`
					Observed int64  `json:"observed"`
				} `json:"details"`
			} `json:"error"`
		}
		r := replies[i]
		if err := json.Unmarshal([]byte(r.body), &out); err != nil || r.status != 200 || out.Status != "failed" {
			t.Fatalf("bomb: %d %s", r.status, r.body)
		}
		// 16 pages, then 1024 at a time: the grow to 1040 pages asks for
		// 65 MiB, past the pack's 32 MiB.
		if e := out.Error; e.Code != "cap.breached" || e.Details.Kind != "wasm-memory" || e.Details.Limit != 32<<20 || e.Details.Observed != 1040*65536 {
			t.Errorf("bomb's error: %+v", e)
		}
	}
	for _, i := range []int{1, 2} {
		if r := replies[i]; r.status != 200 || !strings.Contains(r.body, `"status":"succeeded"`) || !strings.Contains(r.body, `"n":7`) {
			t.Errorf("run %d beside the bomb: %d %s", i, r.status, r.body)
		}
	}
	if r := request(t, "GET", d.base+"/readyz", "", nil); r.status != 200 {
		t.Errorf("readyz after the bombs: %d %s", r.status, r.body)
	}
	metrics := request(t, "GET", d.base+"/metrics", "", nil).body
	for _, want := range []string{
		`wophost_sandbox_violations_total{pack="community.wophost.wasmbomb",rule="memory"} 2`,
		`wophost_sandbox_violations_total{pack="community.wophost.wasmbomb",rule="timeout"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A recorded run of the example WebAssembly node, which reads the host's
// clock and random bytes and asks aiEnvelope for a fortune, replays to
// the same output with no request reaching the provider: every answer the
// module had comes from the run's log. Another run draws other bytes.
func TestWasmReplayIsExact(t *testing.T) {
	pack, err := bin.cache.Pack("examples/packs/wasmdemo")
	if err != nil {
		t.Fatal(err)
	}
	provider := newCountingProvider(t, false)
	state := filepath.Join(t.TempDir(), "state")
	cfg := writeConfig(t, fmt.Sprintf(`
host {
  state_dir = %q
}
capability "ai" {
  plugin = %q
  config {
    default_provider = "chat"
    provider "chat" {
      type     = "openai"
      base_url = "%s/v1"
      model    = "fixture-model"
    }
  }
}
pack "community.wophost.wasmdemo" { path = %q }
`, state, binary(t, "./plugins/aienvelope"), provider.URL, pack))

	in := input("fortune.json")
	orig := runJSON(t, cfg, "wasmdemo.fortune", "--input", in)
	if orig.code != 0 || provider.requests.Load() != 1 {
		t.Fatalf("record: exit %d, %d provider requests\n%s%s", orig.code, provider.requests.Load(), orig.stdout, orig.stderr)
	}
	rec := readRecord(t, state, orig.line.RunID)
	var methods []string
	for _, c := range rec.Invocations.Calls {
		methods = append(methods, c.Family+"."+c.Method)
	}
	if got := strings.Join(methods, " "); got != "openwop.now_ms openwop.random aiEnvelope.generate" || rec.NodeID == "" {
		t.Fatalf("the run's log holds %q, node id %q", got, rec.NodeID)
	}

	rep := runJSON(t, cfg, "--replay", orig.line.RunID)
	if rep.code != 0 || rep.stdout != orig.stdout {
		t.Fatalf("replay: exit %d\n%s\nthe original printed\n%s\n%s", rep.code, rep.stdout, orig.stdout, rep.stderr)
	}
	if n := provider.requests.Load(); n != 1 {
		t.Errorf("the replay reached the provider: %d requests in all", n)
	}
	if s := rep.line.Replay; s == nil || s.Served != 3 || s.Diverged != 0 || s.Live != 0 || s.Branch {
		t.Fatalf("replay summary %+v; want 3 served, nothing live or diverged", s)
	}
	for _, c := range readRecord(t, state, rep.line.RunID).Invocations.Calls {
		if c.Source != dispatch.SourceLog {
			t.Errorf("replayed %s.%s came from %q, not the log", c.Family, c.Method, c.Source)
		}
	}

	other := runJSON(t, cfg, "wasmdemo.fortune", "--input", in)
	if other.code != 0 {
		t.Fatalf("second run: exit %d\n%s", other.code, other.stderr)
	}
	a, b := rec.Invocations.Calls[1].Result, readRecord(t, state, other.line.RunID).Invocations.Calls[1].Result
	if string(a) == string(b) {
		t.Errorf("two runs drew the same random bytes %s: the seed does not follow the run", a)
	}
}

// A signature covers a WebAssembly pack's module as it covers a binary:
// the signed pack loads and runs under require_signature, and one byte of
// the module changed refuses it at load and in `host packs verify`, naming the module.
func TestWasmPackSignatureCoversTheModule(t *testing.T) {
	key, pub := signingKey(t, "wasm-2026")
	for _, tamper := range []bool{false, true} {
		t.Run(fmt.Sprintf("tampered=%v", tamper), func(t *testing.T) {
			dir := wasmPack(t, "wasmbomb")
			signPack(t, key, dir)
			module := filepath.Join(dir, "wasmbomb.wasm")
			if tamper {
				data, err := os.ReadFile(module)
				if err != nil {
					t.Fatal(err)
				}
				// A letter of the echo's answer: the module stays valid.
				i := bytes.Index(data, []byte("completed"))
				if i < 0 {
					t.Fatalf("%s holds no \"completed\"", module)
				}
				data[i] = 'C'
				if err := os.WriteFile(module, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := writeConfigAsIs(t, fmt.Sprintf(`
host {
  require_signature = true
}
trusted_key "wasm-2026" {
  public_key = %q
  namespaces = ["community.wophost.*"]
}
pack "community.wophost.wasmbomb" { path = %q }
`, pub, dir))
			res := runHost(t, "", "--config", cfg, "--json", "packs")
			var packs []struct{ Name, State, Error, SignedBy string }
			if err := json.Unmarshal([]byte(res.stdout), &packs); err != nil || len(packs) != 1 {
				t.Fatalf("host packs: %v\n%s%s", err, res.stdout, res.stderr)
			}
			p := packs[0]
			ver := runHost(t, "", "--config", cfg, "--json", "packs", "verify", dir)
			var answers []verifyAnswer
			if err := json.Unmarshal([]byte(ver.stdout), &answers); err != nil || len(answers) != 1 {
				t.Fatalf("packs verify: %v\n%s%s", err, ver.stdout, ver.stderr)
			}
			if !tamper {
				if p.State != "ready" || p.SignedBy != "wasm-2026" || !answers[0].Verified {
					t.Fatalf("signed pack: %+v, verify %+v", p, answers[0])
				}
				if r := runHost(t, `{"k":1}`, "--config", cfg, "run", "wasmbomb.echo", "--input", "-"); r.code != 0 {
					t.Errorf("run wasmbomb.echo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
				}
				return
			}
			if p.State != "refused" || !strings.HasPrefix(p.Error, "pack_signature_invalid: ") || !strings.Contains(p.Error, "wasmbomb.wasm is not the one signed") {
				t.Errorf("tampered module: %+v", p)
			}
			if a := answers[0]; ver.code != 1 || a.Verified || a.Error == nil || a.Error.Details.Reason != "entry_digest_mismatch" {
				t.Errorf("packs verify of the tampered module: exit %d, %+v %+v", ver.code, a, a.Error)
			}
		})
	}
}
