package main

import (
	"testing"

	"github.com/wophost/wophost/core/host"
)

func TestSandboxColumn(t *testing.T) {
	for _, c := range []struct {
		name string
		in   *host.PackSandbox
		want string
	}{
		{"no record", nil, "uncontained"},
		{"not contained", &host.PackSandbox{}, "uncontained"},
		// A pack that is not contained lists no rule as not enforced: the
		// count goes with containment only.
		{"not contained, rules listed", &host.PackSandbox{NotEnforced: map[string]string{"ipc": "old kernel"}}, "uncontained"},
		{"every rule enforced", &host.PackSandbox{Contained: true}, "contained"},
		{"every rule enforced, empty map", &host.PackSandbox{Contained: true, NotEnforced: map[string]string{}}, "contained"},
		{"one rule not enforced", &host.PackSandbox{Contained: true, NotEnforced: map[string]string{"ipc": "Landlock ABI 6 or later is needed"}}, "contained (1 rule not enforced)"},
		{"two rules not enforced", &host.PackSandbox{Contained: true, Granted: []string{"net.outbound"},
			NotEnforced: map[string]string{"ipc": "Landlock ABI 6 or later is needed", "process_count": "no writable pids cgroup"}}, "contained (2 rules not enforced)"},
	} {
		if got := sandboxColumn(c.in); got != c.want {
			t.Errorf("%s: sandboxColumn(%+v) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// A WebAssembly pack runs in the host's process, whatever its sandbox
// block says, and its column says so, loaded or refused.
func TestPackSandboxColumn(t *testing.T) {
	if got := packSandboxColumn(host.PackInfo{Runtime: "wasm"}); got != "wasm" {
		t.Errorf("wasm pack: %q", got)
	}
	if got := packSandboxColumn(host.PackInfo{Runtime: "go", Sandbox: &host.PackSandbox{Contained: true}}); got != "contained" {
		t.Errorf("go pack: %q", got)
	}
}
