package host

import (
	"context"
	"os"
	"strings"
	"testing"

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
	data, err := os.ReadFile("../../test/packs/wasmbomb/wasmbomb.wasm")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := wasm.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	mod, err := eng.Load(context.Background(), data, wasm.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
