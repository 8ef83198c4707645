// Package console_test drives the operator console of `host serve` in a
// real browser, headless Chromium, against the demo deployment: each
// page shows what the API holds, a replay is made by clicking, the
// sign-in works with bearer tokens, and no page writes an error to the
// browser's console. It takes the console's screenshots for the docs on
// the way (make console-screenshots writes them into docs/console).
package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/wophost/wophost/test/testbin"
)

// capabilities are the capabilities host.hcl.example declares.
var capabilities = []string{"kv", "ai", "prompts", "mcp", "agents"}

// figuresTimeout bounds the wait for the figures page's charts: the
// console's second sample of the metrics, ten seconds after the start,
// and the page's next refresh, ten seconds after it opened.
const figuresTimeout = 45 * time.Second

// packs are the packs host.hcl.example declares.
var packs = []string{"community.wophost.kvdemo", "community.wophost.council", "community.wophost.wasmdemo", "community.wophost.wathello"}

// TestConsole builds the demo deployment once and drives the console of
// two daemons on it: the demo's own config, which asks for no token, and
// the same with a token.
func TestConsole(t *testing.T) {
	exe := findBrowser(t)
	if testing.Short() {
		t.Skip("builds the demo deployment")
	}
	built := t.TempDir()
	if err := testbin.BuildDemo(built); err != nil {
		t.Fatal(err)
	}
	shots := screenshotDir(t)
	t.Run("demo", func(t *testing.T) { testDemo(t, exe, built, shots) })
	t.Run("tokens", func(t *testing.T) { testTokens(t, exe, built, shots) })
}

// serveCopy serves a fresh copy of the deployment built, set up as `make
// run` leaves it, with host.hcl.example listening on a free port and
// asking for tokens if any; it returns the API's base address.
func serveCopy(t *testing.T, built string, tokens ...string) string {
	t.Helper()
	root := t.TempDir()
	if err := testbin.CopyTree(built, root); err != nil {
		t.Fatal(err)
	}
	if err := testbin.SetUpDemo(root); err != nil {
		t.Fatal(err)
	}
	addr, err := testbin.DemoConfig(root, "host.test.hcl", tokens...)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := testbin.ServeDemo(root, "host.test.hcl", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return "http://" + addr
}

// runRecord is what the tests read of GET /v1/runs/{runId}.
type runRecord struct {
	RunID       string `json:"runId"`
	TypeID      string `json:"typeId"`
	Outcome     string `json:"outcome"`
	ReplayOf    string `json:"replayOf"`
	Invocations *struct {
		Calls []struct {
			Seq    int    `json:"seq"`
			Family string `json:"family"`
			Method string `json:"method"`
			Source string `json:"source"`
		} `json:"calls"`
	} `json:"invocations"`
}

// api sends one request to the API and decodes its JSON answer into out,
// failing t on any status but 200.
func api(t *testing.T, method, address string, body any, out any) {
	t.Helper()
	var payload io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		payload = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, address, payload)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s\n%s", method, address, res.Status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s %s: %v\n%s", method, address, err, data)
	}
}

// execute runs a node through the API with the input in the deployment's
// examples/inputs, and returns its run id.
func execute(t *testing.T, base, typeID, inputFile string) string {
	t.Helper()
	input, err := os.ReadFile(testbin.SourceDir(filepath.Join("examples", "inputs", inputFile)))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
	}
	api(t, http.MethodPost, base+"/v1/nodes/"+typeID+":execute", map[string]json.RawMessage{"input": input}, &out)
	if out.Status != "succeeded" || out.RunID == "" {
		t.Fatalf("%s: status %q, run %q", typeID, out.Status, out.RunID)
	}
	return out.RunID
}

// record reads a run's record through the API.
func record(t *testing.T, base, runID string) runRecord {
	t.Helper()
	var rec runRecord
	api(t, http.MethodGet, base+"/v1/runs/"+url.PathEscape(runID), nil, &rec)
	return rec
}

// testDemo drives every page of the console of the demo's config.
func testDemo(t *testing.T, exe, built, shots string) {
	base := serveCopy(t, built)
	describe := execute(t, base, "kvdemo.describe", "recall.json")
	var remembered struct {
		Runs []struct {
			RunID string `json:"runId"`
		} `json:"runs"`
	}
	api(t, http.MethodGet, base+"/v1/runs?typeId=kvdemo.remember", nil, &remembered)
	if len(remembered.Runs) != 1 {
		t.Fatalf("%d runs of kvdemo.remember, want the one of the set-up", len(remembered.Runs))
	}
	remember := remembered.Runs[0].RunID

	tb := newTab(t, exe, base, shots, nil)

	t.Run("overview", func(t *testing.T) {
		tb.open(t, "/ui/", "#view #overview tr[data-capability]")
		states := evaluate[map[string]string](t, tb, `Object.fromEntries(Array.from(
			document.querySelectorAll('#view tr[data-capability]'),
			r => [r.dataset.capability, r.querySelector('.state').textContent]))`)
		for _, name := range capabilities {
			if states[name] != "ready" {
				t.Errorf("capability %s: state %q on the overview, want ready (all: %v)", name, states[name], states)
			}
		}
		listed := evaluate[[]string](t, tb, `Array.from(document.querySelectorAll('#view tr[data-pack]'), r => r.dataset.pack)`)
		for _, p := range packs {
			if !slices.Contains(listed, p) {
				t.Errorf("pack %s is not on the overview (listed: %v)", p, listed)
			}
		}
		if n := evaluate[int](t, tb, `document.querySelectorAll('#view tr[data-family]').length`); n == 0 {
			t.Error("the overview lists no advertised family")
		}
		tb.shoot(t, "overview")
		tb.checkMessages(t)
	})

	var replay string
	t.Run("run", func(t *testing.T) {
		rec := record(t, base, describe)
		if rec.Invocations == nil || len(rec.Invocations.Calls) == 0 {
			t.Fatalf("the record of %s has no calls", describe)
		}
		var want []string
		for _, c := range rec.Invocations.Calls {
			want = append(want, c.Family+"."+c.Method)
		}
		tb.open(t, "/ui/runs/"+describe, "#view table.calls tbody tr[data-call]")
		got := evaluate[[]string](t, tb, `Array.from(document.querySelectorAll('#view table.calls tbody tr[data-call]'), r => r.dataset.call)`)
		if !slices.Equal(got, want) {
			t.Errorf("the run page's calls %v, the record's %v", got, want)
		}
		tb.shoot(t, "run")
		tb.checkMessages(t)

		tb.do(t, "click the replay button", chromedp.Click(chromedp.CSS("#view button[data-replay]")))
		tb.waitFor(t, `location.search.startsWith('?beside=') && document.querySelectorAll('#view .beside .column table.calls').length === 2`,
			"the replay beside its source")
		loc := evaluate[string](t, tb, `location.href`)
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		if u.Path != "/ui/runs/"+describe {
			t.Errorf("after the replay the page is %s, want the source run's", loc)
		}
		replay = u.Query().Get("beside")
		rep := record(t, base, replay)
		if rep.ReplayOf != describe {
			t.Fatalf("run %s replays %q, want %s", replay, rep.ReplayOf, describe)
		}
		var fromLog []int
		for _, c := range rep.Invocations.Calls {
			if c.Source == "log" {
				fromLog = append(fromLog, c.Seq)
			}
		}
		if len(fromLog) == 0 {
			t.Fatalf("the replay %s answered no call from the log: nothing to look for on the page", replay)
		}
		shown := evaluate[[]int](t, tb, `Array.from(
			document.querySelectorAll('#view .beside .column:nth-child(2) table.calls tbody tr[data-seq]'))
			.filter(r => r.lastElementChild.textContent.trim() === 'answered from the log')
			.map(r => Number(r.dataset.seq))`)
		if !slices.Equal(shown, fromLog) {
			t.Errorf("the replay's column says calls %v were answered from the log, its record %v", shown, fromLog)
		}
		if n := evaluate[int](t, tb, `Array.from(document.querySelectorAll('#view .beside .column:first-child table.calls td'))
			.filter(td => td.textContent.trim() === 'answered from the log').length`); n != 0 {
			t.Errorf("the source's column says %d calls were answered from the log; it is no replay", n)
		}
		tb.shoot(t, "replay")
		tb.checkMessages(t)
	})

	t.Run("runs", func(t *testing.T) {
		tb.open(t, "/ui/runs?typeId=kvdemo.describe", "#view #runs")
		listed := evaluate[[]string](t, tb, `Array.from(document.querySelectorAll('#view tr[data-run]'), r => r.dataset.run)`)
		if !slices.Contains(listed, describe) {
			t.Errorf("the runs of kvdemo.describe %v lack %s", listed, describe)
		}
		if replay != "" && !slices.Contains(listed, replay) {
			t.Errorf("the runs of kvdemo.describe %v lack its replay %s", listed, replay)
		}
		if slices.Contains(listed, remember) {
			t.Errorf("the runs of kvdemo.describe %v hold %s, a run of kvdemo.remember", listed, remember)
		}
		if v := evaluate[string](t, tb, `document.getElementById('f-type').value`); v != "kvdemo.describe" {
			t.Errorf("the filter's node type id field holds %q", v)
		}
		tb.checkMessages(t)
		tb.open(t, "/ui/runs", "#view #run-list")
		all := evaluate[[]string](t, tb, `Array.from(document.querySelectorAll('#view tr[data-run]'), r => r.dataset.run)`)
		if !slices.Contains(all, remember) || !slices.Contains(all, describe) {
			t.Errorf("the runs %v lack %s or %s", all, remember, describe)
		}
		tb.shoot(t, "runs")
		tb.checkMessages(t)
	})

	t.Run("prompts", func(t *testing.T) {
		const name = "kvdemo/describe"
		tb.open(t, "/ui/prompts", "#view #prompts")
		link := fmt.Sprintf(`#view tr[data-prompt=%q] a`, name)
		if n := evaluate[int](t, tb, fmt.Sprintf(`document.querySelectorAll(%q).length`, link)); n != 1 {
			t.Fatalf("%d links to prompt %s on the prompts page, want 1", n, name)
		}
		tb.shoot(t, "prompts")
		tb.checkMessages(t)
		tb.do(t, "click "+link, chromedp.Click(chromedp.CSS(link)))
		tb.waitFor(t, `document.querySelector('#view #prompt pre.prompt-body') !== null`, "the prompt's body")
		file, err := os.ReadFile(testbin.SourceDir("examples/prompts/kvdemo-describe.prompt"))
		if err != nil {
			t.Fatal(err)
		}
		_, body, ok := strings.Cut(strings.TrimPrefix(string(file), "---\n"), "\n---\n")
		if !ok || strings.TrimSpace(body) == "" {
			t.Fatal("kvdemo-describe.prompt has no body after its front matter")
		}
		shown := evaluate[string](t, tb, `document.querySelector('#view pre.prompt-body').textContent`)
		if !strings.Contains(shown, strings.TrimSpace(body)) {
			t.Errorf("the prompt page shows\n%s\nwithout the prompt's body\n%s", shown, body)
		}
		tb.shoot(t, "prompt")
		tb.checkMessages(t)
	})

	t.Run("agents", func(t *testing.T) {
		tb.open(t, "/ui/agents", "#view #agents")
		agents := evaluate[[]string](t, tb, `Array.from(document.querySelectorAll('#view tr[data-agent]'), r => r.dataset.agent)`)
		if len(agents) == 0 {
			t.Error("the agents page lists no agent; the council pack installs two")
		}
		tb.shoot(t, "agents")
		tb.checkMessages(t)
	})

	t.Run("packs", func(t *testing.T) {
		tb.open(t, "/ui/packs", "#view #packs")
		listed := evaluate[[]string](t, tb, `Array.from(document.querySelectorAll('#view tr[data-pack]'), r => r.dataset.pack)`)
		for _, p := range packs {
			if !slices.Contains(listed, p) {
				t.Errorf("pack %s is not on the packs page (listed: %v)", p, listed)
			}
		}
		tb.shoot(t, "packs")
		tb.checkMessages(t)
		tb.open(t, "/ui/packs/community.wophost.kvdemo", "#view #pack")
		nodes := evaluate[[]string](t, tb, `Array.from(document.querySelectorAll('#view article.node'), a => a.dataset.node)`)
		for _, n := range []string{"kvdemo.remember", "kvdemo.describe"} {
			if !slices.Contains(nodes, n) {
				t.Errorf("node %s is not on kvdemo's page (listed: %v)", n, nodes)
			}
		}
		tb.shoot(t, "pack")
		tb.checkMessages(t)
	})

	t.Run("phone", func(t *testing.T) {
		tb.do(t, "a phone's window", chromedp.EmulateViewport(phoneWidth, phoneHeight))
		defer func() {
			// Not tb.do: this runs after a failure too, which must not
			// fail twice.
			ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(desktopWidth, desktopHeight)); err != nil {
				t.Errorf("a desktop's window: %v", err)
			}
		}()
		for _, page := range []struct{ path, ready string }{
			{"/ui/", "#view #overview tr[data-capability]"},
			{"/ui/runs/" + describe, "#view table.calls tbody tr[data-call]"},
		} {
			tb.open(t, page.path, page.ready)
			width := evaluate[[]int](t, tb, `[document.documentElement.scrollWidth, window.innerWidth]`)
			if width[1] != phoneWidth {
				t.Fatalf("the window is %d wide, want %d", width[1], phoneWidth)
			}
			if width[0] > width[1]+1 {
				t.Errorf("%s scrolls sideways at a phone's width: %d wide in a window of %d", page.path, width[0], width[1])
			}
			if page.path == "/ui/" {
				tb.shoot(t, "overview-phone")
			}
			tb.do(t, "press Tab", chromedp.KeyEvent(kb.Tab))
			if focused := evaluate[string](t, tb, `document.activeElement.className + ' ' + document.activeElement.textContent`); focused != "skip Skip to content" {
				t.Errorf("%s: the first Tab focuses %q, want the skip link", page.path, focused)
			}
			tb.checkMessages(t)
		}
	})

	// Last: the figures appear once the console has sampled the host's
	// metrics twice, ten seconds after the start, and the page refreshes
	// itself every ten seconds.
	t.Run("figures", func(t *testing.T) {
		tb.open(t, "/ui/figures", "#view #figures")
		tb.waitWithin(t, figuresTimeout, `document.querySelector('#view #figures-span') !== null`, "the figures")
		if n := evaluate[int](t, tb, `document.querySelectorAll('#view #figures figure.chart svg').length`); n == 0 {
			t.Error("the figures page draws no chart")
		}
		if n := evaluate[int](t, tb, `document.querySelectorAll('#view #figures h3[data-family]').length`); n == 0 {
			t.Error("the figures page shows no family's calls after the runs' calls")
		}
		tb.shoot(t, "figures")
		tb.checkMessages(t)
	})
}

// testTokens signs in to the console of a daemon that asks for a token.
func testTokens(t *testing.T, exe, built, shots string) {
	const token = "console-test-token-7f3c91"
	// The near miss: all but the last character right.
	wrong := token[:len(token)-1] + "0"
	base := serveCopy(t, built, token)
	// Each refusal of a view is a 401, which the browser logs as a failed
	// load; those, and nothing else, are expected.
	refused := func(m chromedp.ConsoleMessage) bool {
		return m.Source == "network" && strings.HasPrefix(m.URL, base+"/ui/view/") && strings.Contains(m.Text, "401")
	}
	tb := newTab(t, exe, base, shots, refused)
	signInShown := `!document.getElementById('sign-in').hidden && document.getElementById('view').hidden`
	rows := `document.querySelectorAll('#view tr[data-capability]').length`

	tb.open(t, "/ui/", "#sign-in:not([hidden])")
	if !evaluate[bool](t, tb, signInShown) {
		t.Fatal("the sign-in form is not the only thing shown without a token")
	}
	if n := evaluate[int](t, tb, rows); n != 0 {
		t.Errorf("%d capability rows shown without a token", n)
	}
	if p := evaluate[string](t, tb, `document.getElementById('sign-in-problem').textContent`); p != "" {
		t.Errorf("the sign-in names a problem before any token was given: %q", p)
	}
	tb.shoot(t, "sign-in")
	if n := tb.checkMessages(t); n != 1 {
		t.Errorf("%d refused loads before any token, want 1", n)
	}

	submit := func(value string) {
		t.Helper()
		tb.do(t, "sign in with "+value,
			chromedp.SendKeys(chromedp.ID("token"), value),
			chromedp.Click(chromedp.CSS(`#sign-in-form button[type=submit]`)),
		)
	}

	submit(wrong)
	tb.waitFor(t, `document.getElementById('sign-in-problem').textContent !== '' || `+rows+` > 0`,
		"the sign-in to name the problem with %q, or the overview", wrong)
	if !evaluate[bool](t, tb, signInShown) {
		t.Error("a wrong token left the sign-in form")
	}
	if n := evaluate[int](t, tb, rows); n != 0 {
		t.Fatalf("%d capability rows shown with a wrong token", n)
	}
	if p := evaluate[string](t, tb, `document.getElementById('sign-in-problem').textContent`); !strings.Contains(p, "did not accept") {
		t.Errorf("the sign-in says %q after a wrong token", p)
	}
	if n := tb.checkMessages(t); n != 1 {
		t.Errorf("%d refused loads after the wrong token, want 1", n)
	}

	submit(token)
	tb.waitFor(t, rows+` > 0 && document.getElementById('sign-in').hidden`, "the overview after signing in")
	if loc := evaluate[string](t, tb, `location.href`); strings.Contains(loc, token) {
		t.Errorf("the token is in the address %s", loc)
	}
	if c := evaluate[string](t, tb, `document.cookie`); strings.Contains(c, token) {
		t.Errorf("the token is in a cookie: %q", c)
	}
	if n := tb.checkMessages(t); n != 0 {
		t.Errorf("%d refused loads with the right token", n)
	}

	tb.do(t, "reload", chromedp.Reload())
	tb.waitFor(t, rows+` > 0`, "the overview again after a reload")
	if evaluate[bool](t, tb, `!document.getElementById('sign-in').hidden`) {
		t.Error("a reload asked for the token again")
	}
	if n := tb.checkMessages(t); n != 0 {
		t.Errorf("%d refused loads after the reload", n)
	}
}
