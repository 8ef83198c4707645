package integration

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// With run_as, a pack runs as another user than the host's, with that
// user's group and no other: /proc shows both. It still reaches the host's
// services, which go-plugin's broker serves on sockets the host opens to
// the pack's group, so that a node of it runs as it would as the host's
// user; and its temporary directory, which the host gives to that user.
func TestPackRunsAsSeparateUser(t *testing.T) {
	requireContainment(t)
	if os.Geteuid() != 0 {
		t.Skipf("switching a pack to another user takes root; the test runs as uid %d", os.Geteuid())
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("the test runs packs as the user nobody, which this system does not have: %v", err)
	}
	s := startSandboxHost(t, `  sandbox { run_as = "nobody" }`, fmt.Sprintf("pack %q { path = %q }\n", hostileName, hostilePack(t, "hostile")))

	r := executeNode(t, s.d.base, "kvdemo.remember", `{"input":{"key":"run-as","value":"remembered by nobody"}}`, auth)
	if !r.ok() || r.Output.Version != 1 {
		t.Fatalf("kvdemo.remember by a pack running as nobody: %d %s\n%s", r.status, r.body, s.d.log())
	}
	r = executeNode(t, s.d.base, "kvdemo.recall", `{"input":{"key":"run-as"}}`, auth)
	if !r.ok() || r.Output.Version != 1 || !strings.Contains(r.body, "remembered by nobody") {
		t.Fatalf("kvdemo.recall by a pack running as nobody: %d %s\n%s", r.status, r.body, s.d.log())
	}

	// Its temporary and state directories are its own, as the user it
	// runs as; the state directory through the descriptor the host
	// opened, the host's state_dir being closed to that user.
	if detail := s.try(t, "hostile.try", "own", "", 0).succeeded(t, "own, running as nobody"); !strings.Contains(detail, " and /proc/self/fd/") {
		t.Fatalf("own, running as nobody: %q, want its state directory reached through a descriptor", detail)
	}
	// Another pack's state is out of reach, to nobody's permissions as
	// to the sandbox.
	s.try(t, "hostile.try", "read", anotherPacksState(t, s.state), 0).denied(t, "read of another pack's state", "fs.read")

	// The processes that answered: every one of their ids (real,
	// effective, saved, filesystem) is nobody's, and they kept no
	// supplementary group.
	for name, entry := range map[string]string{
		"the kvdemo pack":  filepath.Join(s.packInfo(t, kvdemoName).Path, "bin", "kvdemo"),
		"the hostile pack": filepath.Join(s.packInfo(t, hostileName).Path, "hostile"),
	} {
		pid := hostChild(t, s.d, entry)
		st := procStatus(t, pid)
		for field, id := range map[string]string{"Uid": nobody.Uid, "Gid": nobody.Gid} {
			if want := strings.Repeat(id+"\t", 3) + id; st[field] != want {
				t.Errorf("%s (pid %d): %s = %q, want %q", name, pid, field, st[field], want)
			}
		}
		if st["Groups"] != "" {
			t.Errorf("%s (pid %d): Groups = %q, want none", name, pid, st["Groups"])
		}
		confinement(t, name+", running as nobody", pid, true)
	}
}

// A plugin contained as another user gets its state directory in
// Configure as it reaches it (a descriptor the host opened: it may not
// walk the host's state_dir), so that the kv plugin opens its store there
// as that user and keeps what it is given from one start to the next.
func TestContainedPluginRunAsKeepsItsState(t *testing.T) {
	requireContainment(t)
	if os.Geteuid() != 0 {
		t.Skipf("switching a plugin to another user takes root; the test runs as uid %d", os.Geteuid())
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("the test runs the plugin as the user nobody, which this system does not have: %v", err)
	}
	state := filepath.Join(t.TempDir(), "state")
	cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
  state_dir  = %q
}
capability "kv" {
  plugin = "wophost-kv"
  sandbox { run_as = "nobody" }
}
`, state))
	put := runHost(t, `{"key":"k","value":"kept by nobody"}`, "--config", cfg, "--json", "call", "acme.kv.put", "--input", "-")
	if put.code != 0 {
		t.Fatalf("acme.kv.put by the kv plugin run as nobody: exit %d\n%s%s", put.code, put.stdout, put.stderr)
	}
	get := runHost(t, `{"key":"k"}`, "--config", cfg, "--json", "call", "acme.kv.get", "--input", "-")
	if get.code != 0 || !strings.Contains(get.stdout, `"value":"kept by nobody"`) {
		t.Fatalf("acme.kv.get in a second start: exit %d\n%s%s", get.code, get.stdout, get.stderr)
	}
	// The store is in the plugin's state directory, nobody's.
	entries, err := os.ReadDir(filepath.Join(state, "plugins", "kv"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("the kv plugin's state directory holds nothing (%v)", err)
	}
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(state, "plugins", "kv", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || fmt.Sprint(st.Uid) != nobody.Uid {
			t.Errorf("%s in the plugin's state directory is not nobody's (%+v)", e.Name(), fi.Sys())
		}
	}
}
