package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
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
