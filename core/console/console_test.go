package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/api"
	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/console"
	"github.com/wophost/wophost/core/console/figures"
	"github.com/wophost/wophost/core/dispatch"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/idempotency"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/core/telemetry"
	"github.com/wophost/wophost/sdk/wop"
)

// fakeHost is a host with run records and packs of the test's choosing.
// It records the filters the console lists runs with.
type fakeHost struct {
	reg     *registry.Registry
	records map[string]*host.RunRecord
	packs   []host.PackInfo
	filters []host.RunFilter
}

func (f *fakeHost) ServesNode(string) bool       { return true }
func (f *fakeHost) Registry() *registry.Registry { return f.reg }
func (f *fakeHost) Packs() []host.PackInfo       { return slices.Clone(f.packs) }
func (f *fakeHost) Agents() []*agents.Entry      { return nil }
func (f *fakeHost) Ready() error                 { return nil }
func (f *fakeHost) Storage() host.StorageInfo {
	return host.StorageInfo{Backend: "embedded", Where: "/state", Writable: true}
}
func (f *fakeHost) PackDetail(string) (host.PackDetail, bool) { return host.PackDetail{}, false }
func (f *fakeHost) Run(context.Context, string, json.RawMessage, host.RunOptions) (*host.RunResult, error) {
	return nil, errors.New("not in this test")
}
func (f *fakeHost) Call(context.Context, string, string, json.RawMessage, host.RunOptions) (json.RawMessage, error) {
	return nil, errors.New("not in this test")
}

func (f *fakeHost) RunRecord(_ context.Context, id string) (*host.RunRecord, error) {
	if r, ok := f.records[id]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("run record %s: %w", id, fs.ErrNotExist)
}

func (f *fakeHost) ListRuns(_ context.Context, filter host.RunFilter) (*host.RunPage, error) {
	f.filters = append(f.filters, filter)
	page := &host.RunPage{}
	for _, r := range f.records {
		if !filter.AllOwners && r.Owner != filter.Owner {
			continue
		}
		page.Runs = append(page.Runs, host.RunSummary{RunID: r.RunID, TypeID: r.TypeID, Outcome: r.Outcome, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt})
	}
	slices.SortFunc(page.Runs, func(a, b host.RunSummary) int { return strings.Compare(a.RunID, b.RunID) })
	return page, nil
}

const (
	plainToken    = "plain-token-0123456789"
	operatorToken = "operator-token-0123456789"
	sourceRun     = "run_00000000000000000000000a"
	replayRun     = "run_00000000000000000000000b"
	otherRun      = "run_00000000000000000000000c"
)

// newConsole serves the API with two tokens, a plain one and one with the
// runs:all scope, and the console mounted under /ui/, over f.
func newConsole(t *testing.T, f *fakeHost) *httptest.Server {
	t.Helper()
	current := api.NewCurrent(f)
	a := api.New(current, api.Options{Tokens: []string{plainToken, operatorToken},
		TokenScopes: map[string][]string{operatorToken: {config.ScopeAllRuns}}})
	c, err := console.New(console.Options{
		Acquire: func() (console.Backend, func()) {
			b, release := current.Acquire()
			return b.(console.Backend), release
		},
		Access: a, Version: "1.2.3", Started: time.Now().Add(-time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Mount(console.Prefix, c)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return srv
}

// demoHost holds a run of the plain token's, its replay, and a run of the
// operator's; the runs carry markup where an attacker could put it.
func demoHost() *fakeHost {
	start := time.Date(2026, 12, 5, 3, 12, 0, 0, time.UTC)
	call := func(seq int, method string, at time.Duration, took int64, source string, err *wop.Error) dispatch.Invocation {
		return dispatch.Invocation{Seq: seq, Caller: "pack:kvdemo", Depth: 1, Family: "acme.kv", Method: method,
			StartedAt: start.Add(at), DurationMicros: took, Source: source, Error: err}
	}
	owner := idempotency.Scope(plainToken)
	f := &fakeHost{reg: registry.New(registry.Implementation{Name: "wophost", Version: "1.2.3"}), records: map[string]*host.RunRecord{
		sourceRun: {RunID: sourceRun, TypeID: "kvdemo.describe", Pack: "kvdemo", Owner: owner, Outcome: host.OutcomeSucceeded,
			StartedAt: start, FinishedAt: start.Add(10 * time.Millisecond),
			Input:  json.RawMessage(`{"key":"<script>alert(1)</script>"}`),
			Output: json.RawMessage(`{"text":"<img src=x onerror=alert(2)>"}`),
			// Out of order on purpose: the timeline orders by Seq.
			Invocations: &dispatch.InvocationLog{Calls: []dispatch.Invocation{
				call(2, "list", 3*time.Millisecond, 2000, "", nil),
				call(1, "get", time.Millisecond, 1000, "", nil),
				call(3, "put", 6*time.Millisecond, 500, "", &wop.Error{Code: "permission_denied", Message: "no"}),
			}}},
		replayRun: {RunID: replayRun, TypeID: "kvdemo.describe", Pack: "kvdemo", Owner: owner, Outcome: host.OutcomeSucceeded, ReplayOf: sourceRun,
			StartedAt: start.Add(time.Minute), FinishedAt: start.Add(time.Minute + 5*time.Millisecond),
			Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`),
			Invocations: &dispatch.InvocationLog{Calls: []dispatch.Invocation{
				call(1, "get", time.Minute, 10, dispatch.SourceLog, nil),
				call(2, "list", time.Minute+time.Millisecond, 10, dispatch.SourceLog, nil),
				call(3, "put", time.Minute+2*time.Millisecond, 700, dispatch.SourceLive, nil),
			}},
			Replay: &dispatch.ReplaySummary{Source: sourceRun, Served: 2, Live: 1, Diverged: 1,
				Divergences: []dispatch.Divergence{{Seq: 3, Family: "acme.kv", Method: "put", Reason: "answer_changed"}}}},
		otherRun: {RunID: otherRun, TypeID: "kvdemo.remember", Pack: "kvdemo", Outcome: host.OutcomeFailed,
			StartedAt: start.Add(2 * time.Minute), FinishedAt: start.Add(2 * time.Minute), Input: json.RawMessage(`{}`),
			Error: &wop.Error{Code: "validation", Message: "bad"}},
	}}
	f.packs = []host.PackInfo{{Name: "kvdemo", Version: "0.1.0", State: host.PackFailed, Error: `<script>alert("pack")</script>`}}
	return f
}

// get asks path with token ("" for none) and returns the status and body.
func get(t *testing.T, srv *httptest.Server, path, token string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(body)
}

// The pages' addresses answer a shell without data to anyone; their
// content answers only a token the API takes, never one that shares all
// but its last byte.
func TestContentNeedsAToken(t *testing.T) {
	srv := newConsole(t, demoHost())
	for _, page := range []string{"/ui/", "/ui/runs", "/ui/runs/" + sourceRun, "/ui/packs", "/ui/figures"} {
		status, _, body := get(t, srv, page, "")
		if status != http.StatusOK || !strings.Contains(body, `id="sign-in"`) || strings.Contains(body, "kvdemo") || strings.Contains(body, sourceRun) {
			t.Errorf("GET %s without a token: %d, want the shell without data:\n%s", page, status, body)
		}
	}
	near := plainToken[:len(plainToken)-1] + "X"
	for _, token := range []string{"", near, plainToken + "0", "Bearer"} {
		status, h, body := get(t, srv, "/ui/view/runs", token)
		if status != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" || strings.Contains(body, sourceRun) {
			t.Errorf("view with token %q: %d %s", token, status, body)
		}
	}
	if status, _, body := get(t, srv, "/ui/view/runs", plainToken); status != http.StatusOK || !strings.Contains(body, sourceRun) {
		t.Errorf("view with the token: %d\n%s", status, body)
	}
}

// A plain token sees its own runs only, and one it may not see answers as
// a missing one does; the runs:all token sees every run.
func TestRunsAreTheTokensOwn(t *testing.T) {
	f := demoHost()
	srv := newConsole(t, f)
	_, _, list := get(t, srv, "/ui/view/runs", plainToken)
	if !strings.Contains(list, sourceRun) || strings.Contains(list, otherRun) {
		t.Errorf("the plain token's list:\n%s", list)
	}
	if last := f.filters[len(f.filters)-1]; last.AllOwners || last.Owner != idempotency.Scope(plainToken) {
		t.Errorf("listed with %+v, want the plain token's scope", last)
	}
	missing, _, missingBody := get(t, srv, "/ui/view/runs/run_0000000000000000000000ff", plainToken)
	hidden, _, hiddenBody := get(t, srv, "/ui/view/runs/"+otherRun, plainToken)
	if hidden != http.StatusNotFound || missing != hidden || strings.Contains(hiddenBody, "kvdemo.remember") ||
		strings.ReplaceAll(hiddenBody, otherRun, "ID") != strings.ReplaceAll(missingBody, "run_0000000000000000000000ff", "ID") {
		t.Errorf("another's run: %d %s\na missing one: %d %s", hidden, hiddenBody, missing, missingBody)
	}
	if status, _, body := get(t, srv, "/ui/view/runs/"+otherRun, operatorToken); status != http.StatusOK || !strings.Contains(body, "kvdemo.remember") {
		t.Errorf("the operator's view of another's run: %d\n%s", status, body)
	}
	_, _, all := get(t, srv, "/ui/view/runs", operatorToken)
	if !strings.Contains(all, otherRun) || !strings.Contains(all, sourceRun) {
		t.Errorf("the operator's list:\n%s", all)
	}
	// The beside run follows the same rule.
	if _, _, body := get(t, srv, "/ui/view/runs/"+sourceRun+"?beside="+otherRun, plainToken); strings.Contains(body, "kvdemo.remember") || !strings.Contains(body, "cannot be shown") {
		t.Errorf("another's run beside:\n%s", body)
	}
}

// Every value from a run, a pack or a plugin is escaped: markup in them
// is text on the page.
func TestValuesAreEscaped(t *testing.T) {
	srv := newConsole(t, demoHost())
	for _, path := range []string{"/ui/view/runs/" + sourceRun, "/ui/view/packs", "/ui/view/"} {
		_, _, body := get(t, srv, path, operatorToken)
		for _, raw := range []string{"<script", "<img"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s holds %s unescaped:\n%s", path, raw, body)
			}
		}
	}
	_, _, body := get(t, srv, "/ui/view/runs/"+sourceRun, operatorToken)
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the input is not shown escaped:\n%s", body)
	}
}

// The timeline lists a run's calls in the order they arrived, with their
// outcome; a replay's says which calls the log answered and where it
// diverged.
func TestTimeline(t *testing.T) {
	srv := newConsole(t, demoHost())
	_, _, body := get(t, srv, "/ui/view/runs/"+sourceRun, operatorToken)
	seqs := regexp.MustCompile(`<tr data-seq="(\d+)" data-call="([^"]+)"`).FindAllStringSubmatch(body, -1)
	var order []string
	for _, m := range seqs {
		order = append(order, m[1]+" "+m[2])
	}
	if want := []string{"1 acme.kv.get", "2 acme.kv.list", "3 acme.kv.put"}; !slices.Equal(order, want) {
		t.Errorf("calls %q, want %q", order, want)
	}
	if !strings.Contains(body, "permission_denied") || strings.Contains(body, "answered from the log") {
		t.Errorf("the source run's calls:\n%s", body)
	}
	_, _, replay := get(t, srv, "/ui/view/runs/"+sourceRun+"?beside="+replayRun, operatorToken)
	if n := strings.Count(replay, "<td>answered from the log</td>"); n != 2 {
		t.Errorf("%d calls answered from the log, want 2:\n%s", n, replay)
	}
	if !strings.Contains(replay, "diverged: answer_changed") || !strings.Contains(replay, `data-source="log"`) || !strings.Contains(replay, "Its replay") {
		t.Errorf("the replay beside its source:\n%s", replay)
	}
}

// A filter that is not one the runs have is refused naming its field,
// and nothing is listed.
func TestRunFiltersNameTheField(t *testing.T) {
	f := demoHost()
	srv := newConsole(t, f)
	for query, field := range map[string]string{
		"status=Succeeded": "status:",
		"since=2026-13-01": "since:",
		"until=yesterday":  "until:",
		"since=2026-12-05T04:00Z&until=2026-12-05T04:00Z": "until:",
	} {
		status, _, body := get(t, srv, "/ui/view/runs?"+query, operatorToken)
		if status != http.StatusBadRequest || !strings.Contains(body, field) || strings.Contains(body, sourceRun) {
			t.Errorf("%s: %d, want 400 naming %s:\n%s", query, status, field, body)
		}
	}
	if len(f.filters) != 0 {
		t.Errorf("the host was asked %d times for a refused filter", len(f.filters))
	}
	status, _, _ := get(t, srv, "/ui/view/runs?status=failed&typeId=kvdemo.remember&since=2026-12-05T03:00&until=2026-12-05T04:00:00Z", operatorToken)
	want := host.RunFilter{TypeID: "kvdemo.remember", Outcome: host.OutcomeFailed, Limit: 25, AllOwners: true,
		Since: time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC), Until: time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)}
	if status != http.StatusOK || len(f.filters) != 1 || f.filters[0] != want {
		t.Errorf("status %d, filters %+v, want %+v", status, f.filters, want)
	}
}

// Every answer of the console carries its Content-Security-Policy, and no
// page has inline script or style for it to allow.
func TestPagesNeedNoInlineScriptOrStyle(t *testing.T) {
	srv := newConsole(t, demoHost())
	for _, path := range []string{"/ui/", "/ui/runs", "/ui/view/", "/ui/view/runs", "/ui/view/runs/" + sourceRun + "?beside=" + replayRun,
		"/ui/view/packs", "/ui/view/prompts", "/ui/view/agents", "/ui/view/figures", "/ui/nowhere", "/ui/assets/console.js"} {
		_, h, body := get(t, srv, path, operatorToken)
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if !strings.HasSuffix(path, ".js") {
			if bad := inlineCode(body); bad != "" {
				t.Errorf("%s has inline script or style: %s", path, bad)
			}
		}
	}
}

// inlineCode returns the first inline script, style or event handler of
// an HTML page or fragment, or "".
func inlineCode(page string) string {
	z := html.NewTokenizer(strings.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			for _, a := range tok.Attr {
				if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
					return tok.String()
				}
			}
			if tok.Data == "style" {
				return tok.String()
			}
			if tok.Data == "script" {
				if !slices.ContainsFunc(tok.Attr, func(a html.Attribute) bool { return a.Key == "src" }) {
					return tok.String()
				}
			}
		}
	}
}

// A page the console does not have is not found; a POST to a page is not
// allowed (a replay is the API's POST).
func TestUnknownPagesAndMethods(t *testing.T) {
	srv := newConsole(t, demoHost())
	if status, _, _ := get(t, srv, "/ui/view/nowhere", operatorToken); status != http.StatusNotFound {
		t.Errorf("unknown view: %d", status)
	}
	res, err := srv.Client().Post(srv.URL+"/ui/runs", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui/runs: %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
}

// The figures page draws what the host's own metrics counted: a family's
// calls, with charts, and the codes calls failed with.
func TestFiguresPage(t *testing.T) {
	m := telemetry.NewMetrics(func() []registry.Record { return nil })
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	sampler := figures.NewSampler(m.Gatherer(), figures.Options{Now: func() time.Time { return now }})
	if err := sampler.Sample(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		var err error
		if i%10 == 0 {
			err = &wop.Error{Code: "permission_denied"}
		}
		m.CallStarted("acme.kv", "get")(err)
	}
	now = now.Add(10 * time.Second)
	if err := sampler.Sample(); err != nil {
		t.Fatal(err)
	}
	f := demoHost()
	current := api.NewCurrent(f)
	a := api.New(current, api.Options{})
	c, err := console.New(console.Options{Acquire: func() (console.Backend, func()) {
		b, release := current.Acquire()
		return b.(console.Backend), release
	}, Access: a, Figures: sampler})
	if err != nil {
		t.Fatal(err)
	}
	a.Mount(console.Prefix, c)
	srv := httptest.NewServer(a)
	defer srv.Close()
	status, _, body := get(t, srv, "/ui/view/figures", "")
	for _, want := range []string{`<h3 data-family="acme.kv">acme.kv</h3>`, "30 calls, 3.0 per second", `data-capability="acme.kv.get"`, "<code>permission_denied</code>", "<svg"} {
		if !strings.Contains(body, want) {
			t.Errorf("the figures page lacks %q", want)
		}
	}
	if status != http.StatusOK || inlineCode(body) != "" {
		t.Errorf("status %d, inline code %q:\n%s", status, inlineCode(body), body)
	}
}
