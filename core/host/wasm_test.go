package host

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/config"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/packmanifest"
	"github.com/wophost/wophost/core/wasm"
)

// A run draws from seeds of its own; a replay of a recorded run, from the
// source run's, both its openwop_random stream and WASI's.
func TestWasmSeedsFollowTheSourceOnReplay(t *testing.T) {
	src := &dispatch.Run{ID: "run_aa", NodeID: "node_aa"}
	replay := &dispatch.Run{ID: "run_bb", NodeID: "node_bb"}
	r1, w1 := wasmSeeds(src, nil)
	r2, w2 := wasmSeeds(replay, nil)
	if r1 == r2 || w1 == w2 || r1 == w1 {
		t.Fatal("two runs, or the two streams of one run, share a seed")
	}
	r3, w3 := wasmSeeds(replay, &RunRecord{RunID: "run_aa", NodeID: "node_aa"})
	if r3 != r1 || w3 != w1 {
		t.Error("a replay does not draw from its source run's seeds")
	}
	// A record without a node id (a process pack's, from before) cannot
	// say the source's seeds: the replay's own are used.
	if r4, _ := wasmSeeds(replay, &RunRecord{RunID: "run_aa"}); r4 != r2 {
		t.Error("a record without a node id gave a seed of its own")
	}
}

// Only crypto and clock are within a module's reach.
func TestWasmUnmet(t *testing.T) {
	got := wasmUnmet([]string{"clock", "crypto", "net.outbound", "fs.read", "env.read", "subprocess", "net.dns", "fs.write"})
	if strings.Join(got, ",") != "net.outbound,fs.read,env.read,subprocess,net.dns,fs.write" {
		t.Errorf("unmet %v", got)
	}
	if got := wasmUnmet([]string{"clock", "crypto"}); len(got) != 0 {
		t.Errorf("unmet %v", got)
	}
}

// A module is held to pack.json's name and nodes, every difference named.
func TestModuleMismatch(t *testing.T) {
	mod := loadBomb(t)
	manifest := func(name string, nodes ...string) *packmanifest.Manifest {
		m := &packmanifest.Manifest{Name: name}
		for _, n := range nodes {
			m.Nodes = append(m.Nodes, packmanifest.Node{TypeID: n})
		}
		return m
	}
	for _, c := range []struct {
		m    *packmanifest.Manifest
		want string
	}{
		{manifest("community.wophost.wasmbomb", "wasmbomb.echo", "wasmbomb.bomb"), ""},
		{manifest("community.wophost.wasmbom", "wasmbomb.bomb", "wasmbomb.echo"), `openwop_pack_name() is "community.wophost.wasmbomb", pack.json's name "community.wophost.wasmbom"`},
		{manifest("community.wophost.wasmbomb", "wasmbomb.bomb"), "it serves wasmbomb.echo, which pack.json does not list"},
		{manifest("community.wophost.wasmbomb", "wasmbomb.bomb", "wasmbomb.echo", "wasmbomb.echoes"), "it serves no node wasmbomb.echoes"},
	} {
		got := moduleMismatch(mod, c.m)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s %v: %q, want %q", c.m.Name, c.m.Nodes, got, c.want)
		}
	}
}

// loadBomb loads the test pack wasmbomb's module.
func loadBomb(t *testing.T) *wasm.Module {
	t.Helper()
	data, err := os.ReadFile("../../test/packs/wasmbomb/wasmbomb.wasm")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := wasm.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	mod, err := eng.Load(context.Background(), data, wasm.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

// The advertisement lists the WebAssembly packs loaded, and neither a
// refused one nor a process pack.
func TestAdvertiseWasmListsLoadedPacksOnly(t *testing.T) {
	h := New(&config.Config{Host: config.Host{StateDir: t.TempDir(), Wasm: config.DefaultWasm()}}, config.NewLoader(), hclog.NewNullLogger(), "test")
	mod := loadBomb(t)
	wasmManifest := &packmanifest.Manifest{Runtime: packmanifest.Runtime{Language: packmanifest.LanguageWasm}}
	h.advertiseWasm([]*Pack{
		{Name: "community.acme.loaded", State: PackReady, module: mod, manifest: wasmManifest},
		{Name: "community.acme.refused", State: PackRefused, manifest: wasmManifest},
		{Name: "community.acme.refusedlate", State: PackRefused, module: mod, manifest: wasmManifest},
		{Name: "community.acme.process", State: PackReady, manifest: &packmanifest.Manifest{Runtime: packmanifest.Runtime{Language: "go"}}},
	})
	var doc struct {
		NodePackRuntimes struct {
			Wasm struct {
				LoadedPacks    []string `json:"loadedPacks"`
				MaxMemoryBytes int64    `json:"maxMemoryBytes"`
			} `json:"wasm"`
		} `json:"nodePackRuntimes"`
	}
	if err := json.Unmarshal(h.reg.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	w := doc.NodePackRuntimes.Wasm
	if strings.Join(w.LoadedPacks, ",") != "community.acme.loaded" || w.MaxMemoryBytes != config.DefaultWasmMaxMemoryBytes {
		t.Errorf("nodePackRuntimes.wasm = %+v", w)
	}
}

// A run's imports go through its log, and a replay of the run gets the
// same answers from the log without asking the clock or the seeded
// stream again.
func TestWasmImportsAnswerFromTheLogOnReplay(t *testing.T) {
	j := dispatch.NewJournal(nil, nil)
	imports := func(l *dispatch.RunLog, run *dispatch.Run) *wasmImports {
		random, _ := wasmSeeds(run, nil)
		return &wasmImports{calls: l, run: run, caller: "pack p node n", random: rand.NewChaCha8(random),
			variables: map[string][]byte{}, channels: map[string][]byte{}}
	}
	ctx := context.Background()
	src, stop := j.Track("run_src", dispatch.LogLimits{}, nil)
	w := imports(src, &dispatch.Run{ID: "run_src", NodeID: "node_src"})
	now1, err := w.NowMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bytes1, err := w.Random(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := w.VariableSet(ctx, "k", []byte(`{"v":1}`)); st != wasm.StatusOK || err != nil {
		t.Fatalf("variable_set: %d %v", st, err)
	}
	v1, found1, err := w.VariableGet(ctx, "k")
	if err != nil || !found1 {
		t.Fatalf("variable_get: %s %v %v", v1, found1, err)
	}
	log := src.Log()
	stop()
	if len(log.Calls) != 4 || log.Calls[0].Family != FamilyOpenWOPImports || log.Calls[1].Method != "random" {
		t.Fatalf("the source's log: %+v", log.Calls)
	}

	time.Sleep(2 * time.Millisecond) // the clock moves on
	rep, stop := j.Track("run_rep", dispatch.LogLimits{}, &dispatch.ReplaySource{RunID: "run_src", Log: log})
	defer stop()
	r := imports(rep, &dispatch.Run{ID: "run_rep", NodeID: "node_rep"})
	now2, err := r.NowMs(ctx)
	if err != nil || now2 != now1 {
		t.Errorf("replayed now_ms %d, %v; the source's %d", now2, err, now1)
	}
	bytes2, err := r.Random(ctx, 8)
	if err != nil || string(bytes2) != string(bytes1) {
		t.Errorf("replayed random %x, %v; the source's %x", bytes2, err, bytes1)
	}
	if _, err := r.VariableSet(ctx, "k", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if v2, found2, err := r.VariableGet(ctx, "k"); err != nil || !found2 || string(v2) != string(v1) {
		t.Errorf("replayed variable_get %s %v %v", v2, found2, err)
	}
	if s := rep.Summary(); s.Served != 4 || s.Diverged != 0 {
		t.Errorf("replay summary %+v", s)
	}
}
