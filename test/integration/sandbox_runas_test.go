package integration

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
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
