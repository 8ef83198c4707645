package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/wop"
)

// promptSetup is a host config with the prompt library plugin over a
// store in a temporary directory, the echo test plugin and the probe pack.
type promptSetup struct {
	cfg, store, pack string
}

func newPromptSetup(t *testing.T) *promptSetup {
	t.Helper()
	s := &promptSetup{store: filepath.Join(t.TempDir(), "prompts"), pack: probePack(t)}
	s.cfg = writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "prompts" {
  plugin   = %q
  families = ["promptLibrary"]
  config {
    dir = %q
  }
}
pack "private.wophost.probe" { path = %q }
`, binary(t, "./plugins/promptlib"), s.store, s.pack))
	return s
}

// writePrompt writes a .prompt file and returns its path.
func writePrompt(t *testing.T, raw string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.prompt")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// publish publishes raw through `host prompts publish` and returns the
// version's digest.
func (s *promptSetup) publish(t *testing.T, raw string) string {
	t.Helper()
	res := runHost(t, "", "--config", s.cfg, "prompts", "publish", writePrompt(t, raw))
	if res.code != 0 {
		t.Fatalf("publish: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	return promptlibrary.DigestOf([]byte(raw))
}

// getInput is the probe.call input for promptLibrary.get of id.
func getInput(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"family": "promptLibrary", "method": "get", "payload": map[string]string{"promptId": id}})
	return b
}

// get runs promptLibrary.get through a node of the in-process host.
func get(t *testing.T, h *host.Host, id string) (*promptlibrary.Prompt, error) {
	t.Helper()
	res, err := h.Run(context.Background(), "probe.call", getInput(id), host.RunOptions{Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	var p promptlibrary.Prompt
	if err := json.Unmarshal(res.Output, &p); err != nil {
		t.Fatalf("get %s: %v\n%.300s", id, err, res.Output)
	}
	return &p, nil
}

func wantPromptCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded; want %s", code)
	}
	we := wop.AsError(err)
	if we.Code != code || we.Capability != promptlibrary.CapabilityGet {
		t.Fatalf("error %+v; want code %s for %s", we, code, promptlibrary.CapabilityGet)
	}
}

// What a node gets is exactly what was published, through every hop.
func TestPromptRoundTripThroughHost(t *testing.T) {
	s := newPromptSetup(t)
	line := "Zeile mit Umlauten äöü und 漢字, trailing spaces   \r\n"
	raws := map[string]string{
		"t/utf8":   "---\nname: t/utf8\n---\nRéponds en français — «comme ça» 🙂\n",
		"t/crlf":   "---\r\nname: t/crlf\r\nenvelopeType: chat\r\n---\r\nline one\r\nline two\r\n",
		"t/spaces": "---\nname: t/spaces\n---\nkeep these   \n\t\n   ",
		"t/big":    "---\nname: t/big\n---\n" + strings.Repeat(line, 1<<20/len(line)+1),
	}
	for _, raw := range raws {
		s.publish(t, raw)
	}
	h := startHost(t, s.cfg)
	for name, raw := range raws {
		digest := promptlibrary.DigestOf([]byte(raw))
		for _, id := range []string{name + "@1", name + "@" + digest, name + "@1#" + digest} {
			p, err := get(t, h, id)
			if err != nil {
				t.Fatalf("get %s: %v", id, err)
			}
			if p.Raw != raw || p.Digest != digest || p.Name != name || p.Version != "1" || p.PromptID != id {
				t.Errorf("get %s: answer differs from the published file (raw %d bytes, want %d; %s %s@%s)",
					id, len(p.Raw), len(raw), p.PromptID, p.Name, p.Version)
			}
			if _, body, _ := strings.Cut(raw, "---\n"); name != "t/crlf" && !strings.HasSuffix(body, p.SystemPrompt) {
				t.Errorf("get %s: systemPrompt is not the file's body", id)
			}
		}
	}
	if p, err := get(t, h, "t/crlf@1"); err != nil || p.SystemPrompt != "line one\r\nline two\r\n" || p.EnvelopeType != "chat" {
		t.Errorf("t/crlf: %+v %v", p, err)
	}
}

// Every unpinned form fails with prompt_unpinned, and every missing or
// mismatched pin with its own code; nothing is substituted.
func TestPromptRefusals(t *testing.T) {
	s := newPromptSetup(t)
	digest := s.publish(t, "---\nname: greet\n---\nHello.\n")
	s.publish(t, "---\nname: greet\n---\nHello again.\n")
	h := startHost(t, s.cfg)
	for _, id := range []string{"greet", "greet@latest", "greet@production", "greet@", "greet@~1", "greet@>=1",
		"greet@sha256:abc", "Greet@1", "../greet@1", "", "greet@1#"} {
		_, err := get(t, h, id)
		wantPromptCode(t, err, promptlibrary.CodePromptUnpinned)
	}
	_, err := get(t, h, "nobody@1")
	wantPromptCode(t, err, promptlibrary.CodePromptNotFound)
	_, err = get(t, h, "greet@3")
	wantPromptCode(t, err, promptlibrary.CodePromptVersionNotFound)
	_, err = get(t, h, "greet@"+promptlibrary.DigestOf([]byte("never published")))
	wantPromptCode(t, err, promptlibrary.CodePromptVersionNotFound)
	_, err = get(t, h, "greet@2#"+digest)
	wantPromptCode(t, err, promptlibrary.CodePromptDigestMismatch)

	// The operator's `host call` has no pack, so no lock map either.
	res := runHost(t, `{"promptId":"greet"}`, "--config", s.cfg, "call", "promptLibrary.get", "--input", "-")
	if e := decodeCallError(t, res); e.Code != promptlibrary.CodePromptUnpinned {
		t.Errorf("host call with a bare name: %+v", e)
	}
}

// A bare name resolves through the pack's lock map, which `host prompts
// lock` writes with digests; the pack still loads after the rewrite.
func TestPromptLockMap(t *testing.T) {
	s := newPromptSetup(t)
	v1 := s.publish(t, "---\nname: team/greet\n---\nHello.\n")
	v2 := s.publish(t, "---\nname: team/greet\n---\nHello, v2.\n")
	res := runHost(t, "", "--config", s.cfg, "prompts", "lock", s.pack, "team/greet@1")
	if res.code != 0 {
		t.Fatalf("lock: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	manifest, err := os.ReadFile(filepath.Join(s.pack, "pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Prompts map[string]string `json:"x-wophost-prompts"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatalf("lock left pack.json invalid: %v\n%s", err, manifest)
	}
	if want := "team/greet@1#" + v1; m.Prompts["team/greet"] != want {
		t.Fatalf("lock map = %v, want team/greet = %s", m.Prompts, want)
	}

	h := startHost(t, s.cfg)
	p, err := get(t, h, "team/greet")
	if err != nil {
		t.Fatalf("bare name through the lock map: %v", err)
	}
	if p.Version != "1" || p.Digest != v1 || p.PromptID != "team/greet" {
		t.Errorf("bare name resolved to %s@%s (%s), want version 1", p.Name, p.Version, p.Digest)
	}
	_, err = get(t, h, "team/other")
	wantPromptCode(t, err, promptlibrary.CodePromptUnpinned)

	// Re-locking without arguments keeps the version; naming the prompt
	// bare moves it to the version published last.
	if res := runHost(t, "", "--config", s.cfg, "prompts", "lock", s.pack); res.code != 0 {
		t.Fatalf("relock: %s%s", res.stdout, res.stderr)
	}
	if res := runHost(t, "", "--config", s.cfg, "--json", "prompts", "lock", s.pack, "team/greet"); res.code != 0 ||
		!strings.Contains(res.stdout, "team/greet@2#"+v2) {
		t.Fatalf("lock to the latest: exit %d %s%s", res.code, res.stdout, res.stderr)
	}

	// The lock map is signed with the rest of pack.json: locking a signed
	// pack says to sign it again.
	const signedWarning = "is signed and its signature covers the lock map"
	if strings.Contains(res.stderr, signedWarning) {
		t.Errorf("an unsigned pack's lock warns of a signature: %s", res.stderr)
	}
	key, _ := signingKey(t, "acme-2026")
	signPack(t, key, s.pack)
	if res := runHost(t, "", "--config", s.cfg, "prompts", "lock", s.pack, "team/greet@1"); res.code != 0 || !strings.Contains(res.stderr, signedWarning) {
		t.Errorf("lock of a signed pack: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
}

// Publishers in separate host processes never lose a version or hand one
// out twice.
func TestPromptConcurrentPublishProcesses(t *testing.T) {
	s := newPromptSetup(t)
	const n = 8
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		file := writePrompt(t, fmt.Sprintf("---\nname: race\n---\nwriter %d\n", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runHost(t, "", "--config", s.cfg, "--json", "prompts", "publish", file)
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, r := range results {
		var out []struct {
			Version string
			Existed bool
			Error   string
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || len(out) != 1 || out[0].Error != "" {
			t.Fatalf("publisher %d: exit %d %s%s", i, r.code, r.stdout, r.stderr)
		}
		if seen[out[0].Version] || out[0].Existed {
			t.Errorf("version %s handed out twice", out[0].Version)
		}
		seen[out[0].Version] = true
	}
	list := runHost(t, "", "--config", s.cfg, "--json", "prompts", "list", "race")
	var versions []json.RawMessage
	if err := json.Unmarshal([]byte(list.stdout), &versions); err != nil || len(versions) != n {
		t.Fatalf("list: %d versions (%v)\n%s", len(versions), err, list.stdout)
	}
	if v := runHost(t, "", "--config", s.cfg, "prompts", "verify"); v.code != 0 {
		t.Errorf("verify: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}

// Different bytes under an existing version are refused; identical bytes
// are a no-op.
func TestPromptPublishImmutable(t *testing.T) {
	s := newPromptSetup(t)
	file := writePrompt(t, "---\nname: fixed\nversion: 2.0.0\n---\nOne.\n")
	s.publish(t, "---\nname: fixed\nversion: 2.0.0\n---\nOne.\n")
	again := runHost(t, "", "--config", s.cfg, "prompts", "publish", file)
	if again.code != 0 || !strings.HasPrefix(again.stdout, "unchanged") {
		t.Errorf("identical republish: exit %d %s%s", again.code, again.stdout, again.stderr)
	}
	changed := runHost(t, "", "--config", s.cfg, "prompts", "publish", writePrompt(t, "---\nname: fixed\nversion: 2.0.0\n---\nTwo.\n"))
	if changed.code != 1 || !strings.Contains(changed.stderr, "already exists") {
		t.Errorf("different bytes under 2.0.0: exit %d %s%s", changed.code, changed.stdout, changed.stderr)
	}
	show := runHost(t, "", "--config", s.cfg, "prompts", "show", "fixed@2.0.0")
	if show.code != 0 || show.stdout != "---\nname: fixed\nversion: 2.0.0\n---\nOne.\n" {
		t.Errorf("show after the refused publish: %q", show.stdout)
	}
}

// A corrupted blob is never served, and verify finds it.
func TestPromptCorruptBlob(t *testing.T) {
	s := newPromptSetup(t)
	digest := s.publish(t, "---\nname: fragile\n---\nIntact.\n")
	hex := strings.TrimPrefix(digest, "sha256:")
	blob := filepath.Join(s.store, "blobs", "sha256", hex[:2], hex)
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, []byte("---\nname: fragile\n---\nTampered.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHost(t, s.cfg)
	for _, id := range []string{"fragile@1", "fragile@" + digest, "fragile@1#" + digest} {
		_, err := get(t, h, id)
		wantPromptCode(t, err, promptlibrary.CodePromptDigestMismatch)
	}
	v := runHost(t, "", "--config", s.cfg, "prompts", "verify")
	if v.code != 1 || !strings.Contains(v.stdout, "CORRUPT  fragile@1") {
		t.Errorf("verify of a corrupt store: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}

// The host checks every answer itself: a plugin that lies is caught
// before the node sees its answer.
func TestPromptHostChecksDigest(t *testing.T) {
	liar := binary(t, "./test/plugins/promptliar")
	for _, mode := range []string{"honest", "tamper", "substitute", "rename"} {
		t.Run(mode, func(t *testing.T) {
			cfg := writeConfig(t, fmt.Sprintf(`
host {
  plugin_dir = "BIN"
}
capability "echo" {
  plugin   = "testcap"
  families = ["test.echo"]
}
capability "prompts" {
  plugin = %q
  config {
    mode = %q
  }
}
pack "private.wophost.probe" { path = %q }
`, liar, mode, probePack(t)))
			h := startHost(t, cfg)
			p, err := get(t, h, "any@4")
			if mode == "honest" {
				if err != nil || p.Version != "4" {
					t.Fatalf("honest answer refused: %+v %v", p, err)
				}
				return
			}
			wantPromptCode(t, err, promptlibrary.CodePromptDigestMismatch)
		})
	}
}

var recordLine = regexp.MustCompile(`(?m)^run record: (.+)$`)

// runRecordPath returns the run record `host run` named on stderr.
func runRecordPath(t *testing.T, res result) string {
	t.Helper()
	m := recordLine.FindStringSubmatch(res.stderr)
	if m == nil {
		t.Fatalf("host run named no run record\nstdout: %s\nstderr: %s", res.stdout, res.stderr)
	}
	return m[1]
}

// A replay resolves the recorded bytes even after the lock map moved on,
// and fails loudly once the store cannot produce them.
func TestPromptReplay(t *testing.T) {
	s := newPromptSetup(t)
	v1 := s.publish(t, "---\nname: sys\n---\nYou are terse.\n")
	if res := runHost(t, "", "--config", s.cfg, "prompts", "lock", s.pack, "sys@1"); res.code != 0 {
		t.Fatalf("lock: %s%s", res.stdout, res.stderr)
	}
	first := runHost(t, string(getInput("sys")), "--config", s.cfg, "run", "probe.call", "--input", "-")
	if first.code != 0 {
		t.Fatalf("run: exit %d\n%s%s", first.code, first.stdout, first.stderr)
	}
	path := runRecordPath(t, first)
	rec, err := host.ReadRunRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.TypeID != "probe.call" || rec.Outcome != host.OutcomeSucceeded || len(rec.Prompts) != 1 {
		t.Fatalf("record = %+v", rec)
	}
	if p := rec.Prompts[0]; p.PromptID != "sys" || p.Name != "sys" || p.Version != "1" || p.Digest != v1 || p.Pin != "sys@1#"+v1 {
		t.Errorf("recorded prompt = %+v", p)
	}
	if filepath.Dir(path) != filepath.Join(filepath.Dir(s.cfg), ".wophost", "runs") {
		t.Errorf("record at %s, want under state_dir/runs", path)
	}

	// The pack moves on to version 2; a plain run sees it, the replay
	// still sees version 1, byte for byte.
	s.publish(t, "---\nname: sys\n---\nYou are verbose.\n")
	if res := runHost(t, "", "--config", s.cfg, "prompts", "lock", s.pack, "sys"); res.code != 0 {
		t.Fatalf("relock: %s%s", res.stdout, res.stderr)
	}
	now := runHost(t, string(getInput("sys")), "--config", s.cfg, "run", "probe.call", "--input", "-")
	if now.code != 0 || !strings.Contains(now.stdout, "verbose") {
		t.Fatalf("run after relock: exit %d %s%s", now.code, now.stdout, now.stderr)
	}
	replay := runHost(t, "", "--config", s.cfg, "run", "--replay", path)
	if replay.code != 0 || replay.stdout != first.stdout {
		t.Fatalf("replay: exit %d\n got %s\nwant %s\n%s", replay.code, replay.stdout, first.stdout, replay.stderr)
	}
	again, err := host.ReadRunRecord(runRecordPath(t, replay))
	if err != nil || again.ReplayOf != rec.RunID || again.Prompts[0].Digest != v1 {
		t.Errorf("replay record = %+v, %v", again, err)
	}
	// The run id finds the same record in the host's storage.
	byID := runHost(t, "", "--config", s.cfg, "run", "--replay", rec.RunID)
	if byID.code != 0 || byID.stdout != first.stdout {
		t.Fatalf("replay by run id: exit %d\n got %s\nwant %s\n%s", byID.code, byID.stdout, first.stdout, byID.stderr)
	}
	if res := runHost(t, "", "--config", s.cfg, "run", "--replay", "run_0123456789abcdef"); res.code == 0 || !strings.Contains(res.stderr, "does not exist") {
		t.Fatalf("replay of an unknown run id: exit %d\n%s", res.code, res.stderr)
	}
	if res := runHost(t, "", "--config", s.cfg, "run", "--replay", path, "--input", "-"); res.code == 0 {
		t.Error("--replay with --input was accepted")
	}
	// With --json, stdout stays the node's output and stderr names the
	// record as JSON.
	js := runHost(t, "", "--config", s.cfg, "--json", "run", "--replay", path)
	var named struct{ RunID, RunRecord string }
	var line string
	for l := range strings.SplitSeq(js.stderr, "\n") {
		if strings.HasPrefix(l, `{`) && strings.Contains(l, `"runId"`) {
			line = l
		}
	}
	if js.code != 0 || json.Unmarshal([]byte(line), &named) != nil || named.RunRecord == "" || !strings.Contains(js.stdout, "You are terse.") {
		t.Errorf("--json replay: exit %d\nstdout %s\nstderr %s", js.code, js.stdout, js.stderr)
	}

	// The store loses version 1: the replay fails, it does not fall back.
	if err := os.Remove(filepath.Join(s.store, "names", "sys", "_versions", "1.json")); err != nil {
		t.Fatal(err)
	}
	// The source run's get succeeded: the refusal now is a divergence at
	// a refusal, and the store's own refusal is its cause.
	lost := runHost(t, "", "--config", s.cfg, "run", "--replay", path)
	e := decodeEnvelope(t, lost)
	var details struct {
		Cause struct{ Code string } `json:"cause"`
	}
	if e.Code != dispatch.CodeReplayDivergedAtRefusal || json.Unmarshal(e.Details, &details) != nil ||
		details.Cause.Code != promptlibrary.CodePromptVersionNotFound {
		t.Errorf("replay against a store without the version: %+v (details %s)", e, e.Details)
	}
}

// A replay refuses a prompt its record does not hold.
func TestPromptReplayRefusesUnrecordedPrompt(t *testing.T) {
	s := newPromptSetup(t)
	s.publish(t, "---\nname: sys\n---\nTerse.\n")
	h := startHost(t, s.cfg)
	rec := &host.RunRecord{RunID: "run_old", TypeID: "probe.call", Input: getInput("sys@1"), Prompts: nil}
	_, err := h.Run(context.Background(), "probe.call", rec.Input, host.RunOptions{Timeout: time.Minute, Replay: rec})
	wantPromptCode(t, err, promptlibrary.CodePromptUnpinned)
}
