package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// hostChild waits for the child of the daemon d whose command line starts
// with entry, the path the host started it from, and returns its pid. A
// contained child first runs as the launcher (the host binary with
// sandbox.LaunchArg), which execs the entry in the same process: only
// once it has does its command line start with entry, so a pid returned
// is one the confinement applies to in full.
func hostChild(t *testing.T, d *daemon, entry string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var found []testbin.Process
		for _, p := range testbin.Descendants(d.cmd.Process.Pid) {
			if p.PPID == d.cmd.Process.Pid && p.State != "Z" && (p.Command == entry || strings.HasPrefix(p.Command, entry+" ")) {
				found = append(found, p)
			}
		}
		switch {
		case len(found) == 1:
			return found[0].PID
		case len(found) > 1:
			t.Fatalf("%d children of the host run %s, want one: %+v", len(found), entry, found)
		case time.Now().After(deadline):
			t.Fatalf("no child of the host runs %s; its children: %+v\n%s", entry, testbin.Descendants(d.cmd.Process.Pid), d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procStatus reads the fields of /proc/PID/status, each value as the
// file has it (tabs between the numbers of Uid and Gid).
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("status of process %d: %v", pid, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// confinement fails t unless the process pid shows no_new_privs and a
// seccomp mode as wanted: 1 and 2 (a filter) for a contained process, 0
// and 0 for one started as an ordinary child of the host.
func confinement(t *testing.T, what string, pid int, contained bool) {
	t.Helper()
	want := map[string]string{"NoNewPrivs": "0", "Seccomp": "0"}
	if contained {
		want = map[string]string{"NoNewPrivs": "1", "Seccomp": "2"}
	}
	st := procStatus(t, pid)
	for _, k := range []string{"NoNewPrivs", "Seccomp"} {
		if st[k] != want[k] {
			t.Errorf("%s (pid %d): %s = %q, want %q (contained: %v)", what, pid, k, st[k], want[k], contained)
		}
	}
}

// A plugin is contained when its capability block has a sandbox block,
// and only then: beside it, a plugin without one runs as an ordinary
// child of the host. The contained plugin still serves its family to a
// pack, which is itself contained, as every pack is by default.
func TestContainedPluginWhenItsBlockAsks(t *testing.T) {
	requireContainment(t)
	state := filepath.Join(t.TempDir(), "state")
	pack := kvdemoPack(t)
	cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  state_dir  = %q
  http {
    listen = "127.0.0.1:0"
    tokens = [env("WOPHOST_API_TOKEN")]
  }
}
capability "kv" {
  plugin = "wophost-kv"
  sandbox {}
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
pack %q { path = %q }
`, state, kvdemoName, pack))
	s := &sandboxSetup{cfg: cfg, state: state, d: startServe(t, cfg, "WOPHOST_API_TOKEN="+apiToken)}

	// The host started each plugin from plugin_dir, and the pack from its
	// directory.
	kv := hostChild(t, s.d, bin.kv)
	echo := hostChild(t, s.d, bin.testcap)
	confinement(t, "the kv plugin, whose block has a sandbox block", kv, true)
	confinement(t, "the echo plugin, whose block has none", echo, false)

	// The contained plugin serves acme.kv to the pack: what remember
	// stored, recall reads back.
	r := executeNode(t, s.d.base, "kvdemo.remember", `{"input":{"key":"contained","value":"kept by a contained plugin"}}`, auth)
	if !r.ok() || r.Output.Version != 1 {
		t.Fatalf("kvdemo.remember through the contained kv plugin: %d %s\n%s", r.status, r.body, s.d.log())
	}
	// On its direct channel: the socket of it is in the plugin's own
	// temporary directory, where its sandbox lets it make one.
	if got := strings.Join(directPaths(readRecord(t, state, r.RunID)), " "); got != "acme.kv.put=direct acme.kv.get=direct" {
		t.Errorf("kvdemo.remember's calls to the contained kv plugin went %s, want both direct\n%s", got, s.d.log())
	}
	r = executeNode(t, s.d.base, "kvdemo.recall", `{"input":{"key":"contained"}}`, auth)
	if !r.ok() || r.Output.Version != 1 || !strings.Contains(r.body, "kept by a contained plugin") {
		t.Fatalf("kvdemo.recall through the contained kv plugin: %d %s\n%s", r.status, r.body, s.d.log())
	}
	// It keeps its store in its own state directory, the one directory
	// outside its temporary one it may write.
	if entries, err := os.ReadDir(filepath.Join(state, "plugins", "kv")); err != nil || len(entries) == 0 {
		t.Errorf("the contained kv plugin left nothing in its state directory (%v)", err)
	}

	// The pack, contained by default, is confined as the contained
	// plugin is.
	confinement(t, "the kvdemo pack, contained by default", hostChild(t, s.d, filepath.Join(pack, "bin", "kvdemo")), true)
	if p := s.packInfo(t, kvdemoName); p.Sandbox == nil || !p.Sandbox.Contained {
		t.Errorf("GET /v1/packs: the kvdemo pack's sandbox is %+v, want it contained", p.Sandbox)
	}
}
