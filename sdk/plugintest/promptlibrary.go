package plugintest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// StoredPrompt is one version the plugin under test holds. Raw is the exact
// text the plugin must return; its digest is computed by the checks.
type StoredPrompt struct {
	Name, Version, Raw string
}

// PromptLibraryConfig says how to run the promptLibrary family checks.
type PromptLibraryConfig struct {
	// Binary, Args, InProcess, Config, Env and StartTimeout are as in Config.
	Binary       string
	Args         []string
	InProcess    *plugin.Plugin
	Config       json.RawMessage
	Env          []string
	StartTimeout time.Duration
	// Prompts are versions the plugin serves under Config; publish them
	// before calling PromptLibrary. At least one is needed, and no two may
	// share a name: the checks invent a missing version of each name.
	Prompts []StoredPrompt
}

// PromptLibrary starts a fresh process of cfg.Binary, configures it and
// checks that it serves promptLibrary.get as docs/contract.md §4.2 requires, one
// subtest per rule:
//
//   - Advertised: the family is described with the method get.
//   - Pinned: each stored prompt, asked as name@version, name@sha256:<hex>
//     and name@version#sha256:<hex>, comes back verbatim: raw is the stored
//     text, digest is sha256 of raw, name and version are the stored ones,
//     promptId echoes the request, and a second get answers the same bytes.
//   - Unpinned: a bare name, name@latest, a label, a range and malformed
//     pins fail with prompt_unpinned; the plugin never substitutes a version.
//   - Missing: an unknown name is prompt_not_found; an unknown version or
//     digest of a known name is prompt_version_not_found.
//   - DigestMismatch: a version pinned with another version's digest is
//     prompt_digest_mismatch.
func PromptLibrary(t *testing.T, cfg PromptLibraryConfig) {
	t.Helper()
	promptLibraryRules(testingT{t}, cfg)
}

// promptLibraryRules runs PromptLibrary's checks.
func promptLibraryRules(t checkT, cfg PromptLibraryConfig) {
	t.Helper()
	if len(cfg.Prompts) == 0 {
		t.Fatal("plugintest: PromptLibraryConfig.Prompts is empty; publish at least one prompt and list it")
	}
	c := &promptLibraryChecks{cfg: cfg, sp: cfg.Prompts[0]}
	c.p = start(t, Config{Binary: cfg.Binary, Args: cfg.Args, InProcess: cfg.InProcess, Config: cfg.Config, Env: cfg.Env, StartTimeout: cfg.StartTimeout})
	t.Run("Advertised", "Describe lists the promptLibrary family with the method get.", c.advertised)
	c.p.configure(t, cfg.Config)
	t.Run("Pinned", "Each stored prompt asked as name@version, name@sha256:<hex> and name@version#sha256:<hex> comes back verbatim, its digest sha256 of raw, the same bytes every time.", c.pinned)
	t.Run("Unpinned", "A bare name, @latest, a label, a range or a malformed pin is prompt_unpinned: the plugin never picks a version.", c.unpinned)
	t.Run("Missing", "An unknown name is prompt_not_found; an unknown version or digest of a known name is prompt_version_not_found.", c.missing)
	t.Run("DigestMismatch", "A version pinned with another version's digest is prompt_digest_mismatch.", c.digestMismatch)
}

// promptLibraryChecks is one run of the promptLibrary checks against the
// configured plugin.
type promptLibraryChecks struct {
	cfg PromptLibraryConfig
	sp  StoredPrompt // the prompt the refusal checks ask about
	p   *Plugin
}

func (c *promptLibraryChecks) advertised(t checkT) {
	f := describedFamily(t, c.p, promptlibrary.Family)
	if !slices.Contains(f.Methods, promptlibrary.MethodGet) {
		t.Errorf("%s lacks the method %s: %v", promptlibrary.Family, promptlibrary.MethodGet, f.Methods)
	}
}

func (c *promptLibraryChecks) get(t checkT, promptID string) (json.RawMessage, error) {
	return c.p.invokeJSON(t, promptlibrary.Family, promptlibrary.MethodGet, promptlibrary.GetRequest{PromptID: promptID}, wop.CallContext{RunID: "plugintest", Depth: 1})
}

// wantCode checks that get of promptID fails with code.
func (c *promptLibraryChecks) wantCode(t checkT, promptID, code string) {
	t.Helper()
	res, err := c.get(t, promptID)
	if err == nil {
		t.Errorf("get %q answered %.200s; want code %s", promptID, res, code)
		return
	}
	if got := wop.CodeOf(err); got != code {
		t.Errorf("get %q: %v; want code %s", promptID, err, code)
	}
}

func (c *promptLibraryChecks) pinned(t checkT) {
	for _, sp := range c.cfg.Prompts {
		digest := promptlibrary.DigestOf([]byte(sp.Raw))
		for _, id := range []string{sp.Name + "@" + sp.Version, sp.Name + "@" + digest, sp.Name + "@" + sp.Version + "#" + digest} {
			first, err := c.get(t, id)
			if err != nil {
				t.Errorf("get %q: %v", id, err)
				continue
			}
			for _, pr := range promptAnswerProblems(first, sp, id) {
				t.Error(pr)
			}
			again, err := c.get(t, id)
			if err != nil || !bytes.Equal(first, again) {
				t.Errorf("get %q twice gave different answers (%v):\n%s\n%s", id, err, first, again)
			}
		}
	}
}

func (c *promptLibraryChecks) unpinned(t checkT) {
	sp := c.sp
	for _, id := range []string{sp.Name, sp.Name + "@latest", sp.Name + "@production", sp.Name + "@", sp.Name + "@~" + sp.Version,
		sp.Name + "@>=" + sp.Version, sp.Name + "@sha256:abc", ""} {
		c.wantCode(t, id, promptlibrary.CodePromptUnpinned)
	}
}

func (c *promptLibraryChecks) missing(t checkT) {
	c.wantCode(t, "plugintest/no-such-prompt@1", promptlibrary.CodePromptNotFound)
	c.wantCode(t, c.sp.Name+"@999999999", promptlibrary.CodePromptVersionNotFound)
	c.wantCode(t, c.sp.Name+"@"+promptlibrary.DigestOf([]byte("plugintest: never published")), promptlibrary.CodePromptVersionNotFound)
}

func (c *promptLibraryChecks) digestMismatch(t checkT) {
	other := promptlibrary.DigestOf([]byte("plugintest: another version"))
	c.wantCode(t, c.sp.Name+"@"+c.sp.Version+"#"+other, promptlibrary.CodePromptDigestMismatch)
}

// promptAnswerProblems lists how res fails to be the verbatim answer for
// sp asked as promptID.
func promptAnswerProblems(res json.RawMessage, sp StoredPrompt, promptID string) []string {
	var got promptlibrary.Prompt
	if err := json.Unmarshal(res, &got); err != nil {
		return []string{fmt.Sprintf("get %q: the answer is not a prompt: %v: %.200s", promptID, err, res)}
	}
	var out []string
	add := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("get %q: "+format, append([]any{promptID}, args...)...))
	}
	if got.Raw != sp.Raw {
		add("raw is not the stored text verbatim (%d bytes, want %d)", len(got.Raw), len(sp.Raw))
	}
	if want := promptlibrary.DigestOf([]byte(sp.Raw)); got.Digest != want {
		add("digest %q, want %q (sha256 of raw)", got.Digest, want)
	}
	if got.Name != sp.Name || got.Version != sp.Version {
		add("answered %s@%s, want %s@%s", got.Name, got.Version, sp.Name, sp.Version)
	}
	if got.PromptID != promptID {
		add("promptId %q does not echo the request", got.PromptID)
	}
	return out
}
