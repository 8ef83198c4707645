package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wophost/wophost/test/testbin"
)

// silentLauncher is a launcher script that never writes the handshake. It
// records when it started (wall clock, in ns) in DIR/started, then leaves
// a child holding its stdout and stderr, as a wrapper around a stuck
// program would, records its pid and the child's in DIR/pids, and waits.
const silentLauncher = `#!/bin/sh
date +%s%N > DIR/started.tmp && mv DIR/started.tmp DIR/started
sleep 300 &
echo "$$ $!" > DIR/pids.tmp && mv DIR/pids.tmp DIR/pids
wait
`

// writeSilentLauncher writes silentLauncher as dir/name, keeping its
// records in a directory of their own. A cleanup kills the launcher's
// group and child, so that a failing test leaves nothing behind.
func writeSilentLauncher(t *testing.T, dir, name string) (path, records string) {
	t.Helper()
	records = t.TempDir()
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(silentLauncher, "DIR", records)), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join(records, "pids"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return path, records
}

// launcherRecords reads when a silent launcher started and its pid (its
// process group's id).
func launcherRecords(t *testing.T, records string) (started time.Time, pgid int) {
	t.Helper()
	ns, err := strconv.ParseInt(strings.TrimSpace(waitForFile(t, filepath.Join(records, "started"))), 10, 64)
	if err != nil {
		t.Fatalf("launcher start time: %v", err)
	}
	pids := strings.Fields(waitForFile(t, filepath.Join(records, "pids")))
	if len(pids) != 2 {
		t.Fatalf("launcher pids: %q", pids)
	}
	pgid, err = strconv.Atoi(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns), pgid
}

// assertGroupGone fails unless process group pgid is empty, allowing the
// kernel a moment to finish exits already under way.
func assertGroupGone(t *testing.T, what string, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(testbin.Group(pgid)) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("%s: process group %d survived: %+v", what, pgid, testbin.Group(pgid))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A plugin and a pack that never complete their handshake, each leaving a
// child that holds its output, hold back neither the good capability nor
// the listener: it answers within start_timeout plus a second of their
// start, they are failed with the reason, and nothing of their process
// groups is left.
func TestServeSilentPluginWithLingeringGrandchild(t *testing.T) {
	const startTimeout = 2 * time.Second
	silentPlugin, pluginRecords := writeSilentLauncher(t, t.TempDir(), "silent-plugin")
	packDir := filepath.Join(t.TempDir(), "silent")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"name":"private.test.silent","version":"1.0.0","kind":"node","engines":{"openwop":">=2.0 <3.0.0"},"runtime":{"language":"go","entry":"silent"},
"nodes":[{"typeId":"silent.x","version":"1.0.0","category":"data","role":"pure"}]}`
	if err := os.WriteFile(filepath.Join(packDir, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	_, packRecords := writeSilentLauncher(t, packDir, "silent")
	// Packs start with the host's start_timeout; the good capability has
	// a generous one of its own, so that a loaded machine cannot fail it.
	cfg := writeConfig(t, `
host {
  plugin_dir    = "BIN"
  start_timeout = "2s"
  http { listen = "127.0.0.1:0" }
}
capability "echo" {
  plugin        = "testcap"
  families      = ["test.echo"]
  start_timeout = "60s"
}
capability "silent" {
  plugin        = "`+silentPlugin+`"
  start_timeout = "2s"
}
pack "private.test.silent" {
  path = "`+packDir+`"
  # The test has it write where the test looks, or start processes:
  # it runs uncontained (containment has its own tests).
  sandbox { enabled = false }
}
`)

	execAt := time.Now()
	d := startServe(t, cfg)
	// The host logs "serving" once its server runs, so the time the test
	// reads the line is an upper bound on when the listener answered.
	servingSeen := time.Now()
	if r := request(t, "GET", d.base+"/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	limit := startTimeout + time.Second
	for what, records := range map[string]string{"silent plugin": pluginRecords, "silent pack": packRecords} {
		started, _ := launcherRecords(t, records)
		took := servingSeen.Sub(started)
		t.Logf("time to listener: %s after the %s's process started (%s after host serve was executed); start_timeout %s",
			took.Round(time.Millisecond), what, servingSeen.Sub(execAt).Round(time.Millisecond), startTimeout)
		if took > limit {
			t.Errorf("the listener answered %s after the %s started, want at most start_timeout + 1s = %s", took, what, limit)
		}
	}

	var recs []record
	plugins := request(t, "GET", d.base+"/v1/plugins", "", nil)
	if err := json.Unmarshal([]byte(plugins.body), &recs); plugins.status != 200 || err != nil {
		t.Fatalf("plugins: %d %v %s", plugins.status, err, plugins.body)
	}
	got := map[string]record{}
	for _, r := range recs {
		got[r.Name] = r
	}
	if r := got["echo"]; r.State != "ready" {
		t.Errorf("echo: %+v, want ready", r)
	}
	if r := got["silent"]; r.State != "failed" || r.FailedPhase != "started" ||
		!strings.Contains(r.LastError, "within start_timeout (2s)") {
		t.Errorf("silent: %+v, want failed in phase started naming start_timeout", r)
	}
	var packs []struct{ Name, State, Error string }
	r := request(t, "GET", d.base+"/v1/packs", "", nil)
	if err := json.Unmarshal([]byte(r.body), &packs); r.status != 200 || err != nil {
		t.Fatalf("packs: %d %v %s", r.status, err, r.body)
	}
	if len(packs) != 1 || packs[0].State != "refused" ||
		!strings.Contains(packs[0].Error, "within start_timeout (2s)") {
		t.Errorf("packs: %+v, want private.test.silent refused naming start_timeout", packs)
	}
	if r := request(t, "GET", d.base+"/readyz", "", nil); r.status != 200 {
		t.Errorf("readyz: %d %s", r.status, r.body)
	}

	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.log())
	}
	for what, records := range map[string]string{"silent plugin": pluginRecords, "silent pack": packRecords} {
		_, pgid := launcherRecords(t, records)
		assertGroupGone(t, what, pgid)
	}
}
