package docs_test

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/wophost/wophost/internal/scaffold"
	"github.com/wophost/wophost/test/testbin"
)

// checkoutPath is how a page's go-mod block names the reader's checkout
// of wophost; the check puts this checkout's path in its place.
const checkoutPath = "/path/to/wophost"

// defaultGoMod is the go.mod of a page's Go blocks when the page shows
// none: a module outside this one that depends on the SDK of this
// checkout through a replace directive.
const defaultGoMod = `module example.com/acme

go 1.26.0

require github.com/wophost/wophost/sdk v0.0.0

replace github.com/wophost/wophost/sdk => /path/to/wophost/sdk
`

// fragmentImports are the packages a Go fragment (a block without a
// package clause) may use, by the name it uses them by.
var fragmentImports = map[string]string{
	"context":       "context",
	"json":          "encoding/json",
	"testing":       "testing",
	"fmt":           "fmt",
	"plugin":        "github.com/wophost/wophost/sdk/plugin",
	"plugintest":    "github.com/wophost/wophost/sdk/plugintest",
	"pack":          "github.com/wophost/wophost/sdk/pack",
	"wop":           "github.com/wophost/wophost/sdk/wop",
	"schema":        "github.com/wophost/wophost/sdk/schema",
	"aienvelope":    "github.com/wophost/wophost/sdk/families/aienvelope",
	"promptlibrary": "github.com/wophost/wophost/sdk/families/promptlibrary",
	"mcp":           "github.com/wophost/wophost/sdk/families/mcp",
	"agentruntime":  "github.com/wophost/wophost/sdk/families/agentruntime",
}

// lineComment matches a line comment, left out when looking for the
// packages a fragment uses.
var lineComment = regexp.MustCompile(`//.*`)

// checkGo builds a page's Go blocks in a module of their own outside the
// repository, as a vendor's module would be, and runs go vet on it (which
// compiles the packages and their tests). A whole file with file=PATH must
// be that file of the repository, and goes to PATH with the files beside
// it that are not Go (what it embeds); one without goes to a directory of
// its own. A fragment is added to the tests of the whole file before it,
// with the imports it uses.
func (p *pageRun) checkGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	mod := t.TempDir()
	goMod := p.goMod
	if goMod == "" {
		goMod = defaultGoMod
	}
	env, err := p.goEnv(t, goMod)
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel string, data []byte) {
		t.Helper()
		path := filepath.Join(mod, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", []byte(strings.ReplaceAll(goMod, checkoutPath, p.root)))
	sum, err := os.ReadFile(filepath.Join(p.root, "sdk", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", sum)

	pkgDir, pkgName := "", ""
	fragments := map[string][]string{}
	for i, b := range p.goBlocks {
		src := b.text + "\n"
		if f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.PackageClauseOnly); err == nil {
			rel, ok := b.info.attrs["file"]
			if ok {
				want, err := os.ReadFile(filepath.Join(p.root, rel))
				if err != nil {
					t.Fatal(err)
				}
				if string(want) != src {
					t.Errorf("%s:%d is not %s as it is in the repository", p.page, b.line, rel)
				}
				copySiblings(t, filepath.Join(p.root, filepath.Dir(rel)), filepath.Join(mod, filepath.Dir(rel)))
			} else {
				rel = fmt.Sprintf("block%d/main.go", i)
			}
			write(rel, []byte(src))
			pkgDir, pkgName = filepath.Dir(rel), f.Name.Name
			continue
		}
		if pkgDir == "" {
			t.Fatalf("%s:%d: a Go fragment with no whole file above it", p.page, b.line)
		}
		fragments[pkgDir+"\x00"+pkgName] = append(fragments[pkgDir+"\x00"+pkgName], b.text)
	}
	for k, frags := range fragments {
		dir, name, _ := strings.Cut(k, "\x00")
		body := strings.Join(frags, "\n\n")
		code := lineComment.ReplaceAllString(body, "")
		var imports []string
		for id, path := range fragmentImports {
			if regexp.MustCompile(`\b` + id + `\.`).MatchString(code) {
				imports = append(imports, fmt.Sprintf("\t%q", path))
			}
		}
		sort.Strings(imports)
		src := fmt.Sprintf("package %s\n\nimport (\n%s\n)\n\n%s\n", name, strings.Join(imports, "\n"), body)
		write(dir+"/doc_test.go", []byte(src))
	}

	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = mod
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("go vet in a module of the page's Go blocks: %v\n%s", err, out.String())
	}
}

// goEnv is the environment that builds a module with the go.mod
// goMod: one replacing the SDK with /path/to/wophost/sdk builds the
// checkout's; one requiring a version of the SDK with no replace line
// fetches it, written from the checkout's HEAD (or the version's tag) by
// sdk-proxy, from a proxy directory as a vendor would (see
// testbin.ModuleEnv). Either may add go.sum lines (-mod=mod).
func (p *pageRun) goEnv(t *testing.T, goMod string) ([]string, error) {
	t.Helper()
	f, err := modfile.Parse("go.mod", []byte(goMod), nil)
	if err != nil {
		return nil, fmt.Errorf("the go-mod block: %w", err)
	}
	if len(f.Replace) > 0 {
		if !strings.Contains(goMod, checkoutPath+"/sdk") {
			return nil, fmt.Errorf("the go-mod block does not replace the SDK with %s/sdk", checkoutPath)
		}
		return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"), nil
	}
	version := ""
	for _, r := range f.Require {
		if r.Mod.Path == scaffold.SDKModule {
			version = r.Mod.Version
		}
	}
	if version == "" {
		return nil, fmt.Errorf("the go-mod block neither requires nor replaces %s", scaffold.SDKModule)
	}
	testbin.NeedGitCheckout(t)
	proxy := filepath.Join(t.TempDir(), "goproxy")
	if _, err := testbin.SDKProxy(t.TempDir(), proxy, version); err != nil {
		return nil, err
	}
	env, err := testbin.ModuleEnv(t.TempDir(), "file://"+filepath.ToSlash(proxy))
	if err != nil {
		return nil, err
	}
	for i, kv := range env {
		if flags, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			env[i] = "GOFLAGS=" + flags + " -mod=mod"
		}
	}
	return append(env, "GOWORK=off", testbin.SDKNoSumDB), nil
}

// copySiblings copies the files of src that are not Go source into dst,
// subdirectories included.
func copySiblings(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		return testbin.CopyFile(path, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
}
