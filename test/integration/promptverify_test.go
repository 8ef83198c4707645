package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/test/testbin"
)

// A version record deleted by hand leaves its blob behind: prompts verify
// names the blob as an orphan, says how to restore or remove it, and exits
// 1; once it is removed the store verifies clean.
func TestPromptsVerifyReportsOrphanedBlob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prompts")
	cfg := storeConfig(t, dir)
	raw := "---\nname: team/greet\n---\nSay hello.\n"
	if res := runHost(t, "", "--config", cfg, "prompts", "publish", writePrompt(t, raw)); res.code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if err := os.Remove(filepath.Join(dir, "names", "team", "greet", "_versions", "1.json")); err != nil {
		t.Fatal(err)
	}
	digest := promptlibrary.DigestOf([]byte(raw))
	blob := filepath.Join(dir, "blobs", "sha256", digest[len("sha256:"):][:2], digest[len("sha256:"):])

	res := runHost(t, "", "--config", cfg, "prompts", "verify")
	if res.code != 1 {
		t.Fatalf("verify of a store with an orphaned blob: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
	}
	line := grepLines(res.stdout, "ORPHAN")
	for _, want := range []string{digest, blob, "no version record names this blob", "rm -f " + blob} {
		if !strings.Contains(line, want) {
			t.Errorf("verify's ORPHAN line lacks %q:\n%s", want, res.stdout)
		}
	}
	if !strings.HasSuffix(res.stdout, ", 1 problem\n") {
		t.Errorf("verify does not end with the count:\n%s", res.stdout)
	}

	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if res := runHost(t, "", "--config", cfg, "prompts", "verify"); res.code != 0 || !strings.HasSuffix(res.stdout, ", no problems\n") {
		t.Errorf("verify after removing the orphan: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// host prompts lock refuses a pack.json that still spells the lock map
// "prompts", saying what to rename it to, and leaves the file alone.
func TestPromptsLockRefusesTheOldKey(t *testing.T) {
	cfg := storeConfig(t, filepath.Join(t.TempDir(), "prompts"))
	if res := runHost(t, "", "--config", cfg, "prompts", "publish", writePrompt(t, "---\nname: sys\n---\nHi.\n")); res.code != 0 {
		t.Fatalf("publish: exit %d\n%s", res.code, res.stderr)
	}
	pack := t.TempDir()
	old := `{"name": "private.test.old", "prompts": {}}`
	if err := os.WriteFile(filepath.Join(pack, "pack.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runHost(t, "", "--config", cfg, "prompts", "lock", pack, "sys")
	if res.code == 0 || !strings.Contains(res.stderr, `"x-wophost-prompts"`) {
		t.Errorf("lock of an old pack.json: exit %d, want a failure naming x-wophost-prompts\n%s%s", res.code, res.stdout, res.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(pack, "pack.json")); string(b) != old {
		t.Errorf("pack.json was rewritten:\n%s", b)
	}
}

// storeConfig writes a config whose only capability is the prompt library
// plugin over the file store at dir, and returns its path.
func storeConfig(t *testing.T, dir string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config {
    dir = %q
  }
}
`, binary(t, "./plugins/promptlib"), dir))
}

// A pinned version whose record and bytes are both gone leaves nothing in
// the store for it to check: prompts verify finds it from the packs the
// config declares, naming the pack, the pin and its pack.json, and the
// host refuses the pack at load naming the pin. Another version of the
// same name does not stand in for the pinned one.
func TestPromptsVerifyAndLoadFindAGonePin(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "prompts")
	kvdemo := filepath.Join(dir, "kvdemo")
	if err := testbin.LayOutPack("examples/packs/kvdemo", binary(t, "./examples/packs/kvdemo"), kvdemo); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "kv" {
  plugin = "wophost-kv"
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config {
    dir = %q
  }
}
pack "community.wophost.kvdemo" { path = %q }
`, binary(t, "./plugins/promptlib"), store, kvdemo))
	prompt := testbin.SourceDir("examples/prompts/kvdemo-describe.prompt")
	if res := runHost(t, "", "--config", cfg, "prompts", "publish", prompt); res.code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	const pin = "kvdemo/describe@1#sha256:c75148f361d2264872b6a2198a17e2e6ff522eee383d44355eb0aad1f2909ebb"
	if res := runHost(t, "", "--config", cfg, "prompts", "verify"); res.code != 0 || !strings.HasSuffix(res.stdout, ", 1 pack pins checked, no problems\n") {
		t.Fatalf("verify with the pin held: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if state, errText := packState(t, cfg, "community.wophost.kvdemo"); state == "refused" {
		t.Fatalf("kvdemo with its pin held: %s %s", state, errText)
	}

	// The pinned version goes, record and bytes; a version 2 of the name
	// comes.
	raw, err := os.ReadFile(prompt)
	if err != nil {
		t.Fatal(err)
	}
	digest := promptlibrary.DigestOf(raw)[len("sha256:"):]
	for _, p := range []string{filepath.Join(store, "names", "kvdemo", "describe", "_versions", "1.json"), filepath.Join(store, "blobs", "sha256", digest[:2], digest)} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if res := runHost(t, "", "--config", cfg, "prompts", "publish", writePrompt(t, "---\nname: kvdemo/describe\nversion: 2\n---\nDescribe it.\n")); res.code != 0 {
		t.Fatalf("publish version 2: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	res := runHost(t, "", "--config", cfg, "prompts", "verify")
	if res.code != 1 {
		t.Fatalf("verify with the pinned version gone: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
	}
	line := grepLines(res.stdout, "PIN")
	for _, want := range []string{pin, filepath.Join(kvdemo, "pack.json"), "community.wophost.kvdemo", "prompt_version_not_found", "host prompts publish"} {
		if !strings.Contains(line, want) {
			t.Errorf("verify's PIN line lacks %q:\n%s", want, res.stdout)
		}
	}
	if !strings.HasSuffix(res.stdout, ", 1 pack pins checked, 1 problem\n") {
		t.Errorf("verify does not end with the pins and the count:\n%s", res.stdout)
	}

	state, errText := packState(t, cfg, "community.wophost.kvdemo")
	if state != "refused" || !strings.Contains(errText, pin) || !strings.Contains(errText, "x-wophost-prompts") {
		t.Errorf("kvdemo with its pinned version gone: %s %q, want refused naming %s", state, errText, pin)
	}
}
