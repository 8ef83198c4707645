// Package console is the operator console of `host serve`: HTML pages
// under /ui/ that show the host, its runs and their calls.
//
// A page is two requests. The page's address answers a shell that holds
// no data and needs no credential; its script then asks /ui/view/ and the
// same path for the page's content, rendered on the server from Go
// templates, with the bearer token the operator gave in that tab. The
// token lives in the tab's session storage, never in an address or a
// cookie, so another tab, another site or a link cannot use it. A change
// (a replay) is the API's own POST, with the same token.
package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wophost/wophost/core/agents"
	"github.com/wophost/wophost/core/console/figures"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/sdk/wop"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// viewPrefix is where a page's content is asked for: Prefix + "view/"
// and the page's own path.
const viewPrefix = Prefix + "view/"

// Backend is what the console reads of the host that serves; *host.Host
// satisfies it.
type Backend interface {
	Registry() *registry.Registry
	Packs() []host.PackInfo
	PackDetail(name string) (host.PackDetail, bool)
	Agents() []*agents.Entry
	Ready() error
	Storage() host.StorageInfo
	RunRecord(ctx context.Context, runID string) (*host.RunRecord, error)
	ListRuns(ctx context.Context, f host.RunFilter) (*host.RunPage, error)
	// Call makes an operator's host-service call, for the prompt
	// library's and the agent runtime's read-only management methods.
	Call(ctx context.Context, family, method string, payload json.RawMessage, opts host.RunOptions) (json.RawMessage, error)
}

// Access is the API's authentication, which the console shares.
type Access interface {
	// Authorized reports whether r carries a credential the API
	// accepts (any request does when the API has no tokens).
	Authorized(r *http.Request) bool
	// RunScope returns whose runs r's credential may see: every run when
	// all is true, otherwise those whose record names owner.
	RunScope(r *http.Request) (owner string, all bool)
}

// Options configure a Console.
type Options struct {
	// Acquire returns the host that serves now and a func to call when
	// done with it; the host is nil while none is running.
	Acquire func() (Backend, func())
	Access  Access
	// Figures is the sampler of the host's metrics the figures page
	// draws; nil leaves the page saying there are none.
	Figures *figures.Sampler
	// Version is the host's version, and Started when it started.
	Version string
	Started time.Time
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger hclog.Logger
}

// Console is the console's http.Handler, for paths under Prefix.
type Console struct {
	opts  Options
	pages *template.Template
	mux   *http.ServeMux
	// shell is the page every console address answers, and assets the
	// embedded files with their ETags.
	shell  []byte
	assets map[string]asset
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// contentSecurityPolicy allows the console's own script, styles and
// images and nothing else: no inline script or style, no other origin,
// no framing, and fetches to the console's own origin only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// New returns the console; it fails only when its embedded templates do
// not parse, which a test holds.
func New(opts Options) (*Console, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	pages, err := template.New("console").Funcs(funcs()).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	c := &Console{opts: opts, pages: pages, mux: http.NewServeMux(), assets: map[string]asset{}}
	if err := c.loadAssets(); err != nil {
		return nil, err
	}
	var shell bytes.Buffer
	if err := pages.ExecuteTemplate(&shell, "shell.html", shellData{Version: opts.Version, Assets: c.assetNames()}); err != nil {
		return nil, fmt.Errorf("console shell: %w", err)
	}
	c.shell = shell.Bytes()
	views := map[string]http.HandlerFunc{"{$}": c.overview, "runs": c.runs, "runs/{run}": c.run,
		"prompts": c.prompts, "prompts/{name}": c.prompt, "agents": c.agents, "packs": c.packs,
		"packs/{name}": c.pack, "figures": c.figures}
	for _, page := range pagePatterns {
		c.mux.HandleFunc("GET "+Prefix+page, c.serveShell)
		c.mux.Handle("GET "+viewPrefix+page, c.authed(views[page]))
	}
	c.mux.HandleFunc("GET "+Prefix+"assets/{name}", c.serveAsset)
	c.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, &wop.Error{Code: httpstatus.CodeMethodNotAllowed, Message: "the console's pages are read with GET; a replay is POST /v1/runs/{runId}:replay"})
			return
		}
		writeError(w, wop.Errorf(wop.CodeNotFound, "the console has no page %s", clip(r.URL.Path, 200)))
	})
	return c, nil
}

// pagePatterns are the console's pages, as ServeMux patterns relative to
// Prefix; each has a view of the same path under viewPrefix.
var pagePatterns = []string{"{$}", "runs", "runs/{run}", "prompts", "prompts/{name}", "agents", "packs", "packs/{name}", "figures"}

// ServeHTTP implements http.Handler: every answer carries the console's
// security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// authed answers 401 to a request without a credential the API takes;
// the shell's script then asks for one.
func (c *Console) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.opts.Access.Authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wophost"`)
			writeError(w, &wop.Error{Code: httpstatus.CodeUnauthenticated, Message: "a valid bearer token is required"})
			return
		}
		h(w, r)
	})
}

// shellData is what the shell template is given.
type shellData struct {
	Version string
	Assets  map[string]string
}

func (c *Console) serveShell(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(c.shell)
}

// loadAssets reads the embedded assets and computes their ETags.
func (c *Console) loadAssets() error {
	return fs.WalkDir(assetFiles, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
			".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8"}[path.Ext(p)]
		if ct == "" {
			return fmt.Errorf("console asset %s: no content type for its extension", p)
		}
		c.assets[path.Base(p)] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
}

// assetNames maps each asset's name to its address with its ETag as a
// query, so that a browser asks again after an upgrade.
func (c *Console) assetNames() map[string]string {
	out := map[string]string{}
	for name, a := range c.assets {
		out[name] = Prefix + "assets/" + name + "?v=" + strings.Trim(a.etag, `"`)
	}
	return out
}

func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := c.assets[r.PathValue("name")]
	if !ok {
		writeError(w, wop.Errorf(wop.CodeNotFound, "the console has no asset %s", clip(r.PathValue("name"), 100)))
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(a.body)
}

// writeError answers err in the API's error envelope.
func writeError(w http.ResponseWriter, err error) {
	status, env := httpstatus.Refusal(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(env)
}

// clip returns s, or its first n bytes and an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
