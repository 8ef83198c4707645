package integration

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
)

// directPaths lists a record's calls as family.method=direct|routed.
func directPaths(rec *host.RunRecord) []string {
	var out []string
	for _, c := range rec.Invocations.Calls {
		path := "routed"
		if c.Direct {
			path = "direct"
		}
		out = append(out, c.Family+"."+c.Method+"="+path)
	}
	return out
}

// runRecorded runs typeID with the example input file on h, keeping a
// record, and returns the record.
func runRecorded(t *testing.T, h *host.Host, state, typeID, inputFile string) *host.RunRecord {
	t.Helper()
	in, err := os.ReadFile(input(inputFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := h.Run(ctx, typeID, json.RawMessage(in), host.RunOptions{Record: true})
	if err != nil {
		t.Fatalf("%s: %v", typeID, err)
	}
	return readRecord(t, state, res.RunID)
}

// A node's calls to families without a host-side check take the plugins'
// direct channels: they reach the outer edge (the provider, the MCP
// server) and the run's invocation log keeps them, marked direct.
// promptLibrary stays on the host, which pins prompts. direct_calls =
// false keeps one capability's calls on the host; with direct_channels =
// false every call is routed.
func TestDirectChannels(t *testing.T) {
	for _, tc := range []struct {
		name, hostExtra string
		want            map[string][]string
	}{
		{"on by default", "", map[string][]string{
			"kvdemo.remember":  {"acme.kv.put=direct", "acme.kv.get=direct"},
			"kvdemo.describe":  {"acme.kv.get=direct", "promptLibrary.get=routed", "aiEnvelope.generate=direct"},
			"kvdemo.wordcount": {"acme.kv.get=direct", "mcp.callTool=direct", "aiEnvelope.mcp.samplingProbe=routed"},
		}},
		{"kept on the host for one capability", "", map[string][]string{
			"kvdemo.remember":  {"acme.kv.put=routed", "acme.kv.get=routed"},
			"kvdemo.describe":  {"acme.kv.get=routed", "promptLibrary.get=routed", "aiEnvelope.generate=direct"},
			"kvdemo.wordcount": {"acme.kv.get=routed", "mcp.callTool=direct", "aiEnvelope.mcp.samplingProbe=routed"},
		}},
		{"switched off", "  direct_channels = false", map[string][]string{
			"kvdemo.remember":  {"acme.kv.put=routed", "acme.kv.get=routed"},
			"kvdemo.describe":  {"acme.kv.get=routed", "promptLibrary.get=routed", "aiEnvelope.generate=routed"},
			"kvdemo.wordcount": {"acme.kv.get=routed", "mcp.callTool=routed", "aiEnvelope.mcp.samplingProbe=routed"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newReplayEnv(t, tc.hostExtra)
			if tc.name == "kept on the host for one capability" {
				keepOnHost(t, e.cfg, "kv")
			}
			h := startHost(t, e.cfg)
			for _, typeID := range []string{"kvdemo.remember", "kvdemo.describe", "kvdemo.wordcount"} {
				p0, m0 := e.counts()
				rec := runRecorded(t, h, e.state, typeID, map[bool]string{true: "remember.json", false: "recall.json"}[typeID == "kvdemo.remember"])
				p1, m1 := e.counts()
				if got, want := strings.Join(directPaths(rec), " "), strings.Join(tc.want[typeID], " "); got != want {
					t.Errorf("%s: calls %s, want %s", typeID, got, want)
				}
				if typeID == "kvdemo.describe" && p1 != p0+1 || typeID == "kvdemo.wordcount" && m1 != m0+1 {
					t.Errorf("%s reached the provider %d times and the MCP server %d times", typeID, p1-p0, m1-m0)
				}
				for _, c := range rec.Invocations.Calls {
					if c.Error == nil && len(c.Result) == 0 && !c.Redacted {
						t.Errorf("%s: %s.%s logged without its outcome", typeID, c.Family, c.Method)
					}
				}
			}
		})
	}
}

// keepOnHost sets direct_calls = false in the capability block name of
// the config at path.
func keepOnHost(t *testing.T, path, name string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block := "capability \"" + name + "\" {\n"
	if !strings.Contains(string(b), block) {
		t.Fatalf("no %s block in %s", name, b)
	}
	out := strings.Replace(string(b), block, block+"  direct_calls = false\n", 1)
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A plugin that dies takes its channel with it: the restarted process
// serves a new channel, and the next run's calls take it.
func TestDirectChannelAfterPluginRestart(t *testing.T) {
	e := newReplayEnv(t, "")
	h := startHost(t, e.cfg)
	before := runRecorded(t, h, e.state, "kvdemo.remember", "remember.json")
	if got := strings.Join(directPaths(before), " "); got != "acme.kv.put=direct acme.kv.get=direct" {
		t.Fatalf("before the restart: %s", got)
	}
	pids := children("wophost-kv")
	if len(pids) != 1 {
		t.Fatalf("kv plugin processes: %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForState(t, h, "kv", registry.StateReady, 1)
	after := runRecorded(t, h, e.state, "kvdemo.remember", "remember.json")
	if got := strings.Join(directPaths(after), " "); got != "acme.kv.put=direct acme.kv.get=direct" {
		t.Fatalf("after the restart: %s", got)
	}
}

// A reload that keeps a plugin's process applies a changed direct_calls
// all the same: the next runs' calls take the path it says, on the same
// process.
func TestDirectCallsChangedAtReload(t *testing.T) {
	e := newReplayEnv(t, "")
	h := startHost(t, e.cfg)
	if got := strings.Join(directPaths(runRecorded(t, h, e.state, "kvdemo.remember", "remember.json")), " "); got != "acme.kv.put=direct acme.kv.get=direct" {
		t.Fatalf("before the reload: %s", got)
	}
	before := h.ProcessIDs()["kv"]
	keepOnHost(t, e.cfg, "kv")
	cfg, ldr, diags := config.Load(e.cfg)
	if diags.HasErrors() {
		t.Fatal(config.FormatDiagnostics(diags))
	}
	next, _, err := h.Reload(context.Background(), cfg, ldr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Close)
	if after := next.ProcessIDs()["kv"]; after == 0 || after != before {
		t.Fatalf("the kv plugin's process went from %d to %d: the reload replaced it", before, after)
	}
	if got := strings.Join(directPaths(runRecorded(t, next, e.state, "kvdemo.remember", "remember.json")), " "); got != "acme.kv.put=routed acme.kv.get=routed" {
		t.Fatalf("after the reload: %s", got)
	}
}
