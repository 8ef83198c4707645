package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/httpstatus"
	"github.com/wophost/wophost/internal/promptfile"
	"github.com/wophost/wophost/plugins/aienvelope/provider/local"
	"github.com/wophost/wophost/sdk/families/agentruntime"
	"github.com/wophost/wophost/sdk/wop"
	"github.com/wophost/wophost/test/testbin"
)

// dedicatedPages are the pages whose blocks a test of their own checks,
// with that test's name; TestDocPages leaves them to it.
var dedicatedPages = map[string]string{
	replayPath:         "TestReplayDocBlocks",
	severalHostsPath:   "TestSeveralHostsCodeBlocks",
	contractPath:       "TestContractCodeBlocks",
	protocolPath:       "TestProtocolCodeBlocks",
	conformancePath:    "TestConformanceDocBlocks",
	startingPointsPath: "TestStartingPointsDocBlocks",
	packSigningPath:    "TestPackSigningDocBlocks",
	// Its blocks need a release: test/release checks them against one.
	installPath: "TestInstallDocBlocks in test/release",
}

// installPath is the page on installing a release.
const installPath = "docs/install.md"

// fenceInfo is a block's info string: the language, the first word (what
// GitHub highlights by), and key=value attributes after it that say what
// the block shows, e.g. ```json shape=run-outcome.
type fenceInfo struct {
	lang  string
	attrs map[string]string
}

func parseInfo(info string) fenceInfo {
	words := strings.Fields(info)
	fi := fenceInfo{attrs: map[string]string{}}
	if len(words) == 0 {
		return fi
	}
	fi.lang = words[0]
	for _, w := range words[1:] {
		k, v, _ := strings.Cut(w, "=")
		fi.attrs[k] = v
	}
	return fi
}

// TestDocPages checks every fenced block of README.md and of the pages
// under docs/ that have no test of their own (dedicatedPages). A block is
// checked by its language, and a language without a checker fails:
//
//   - sh with "$ " lines: a transcript, run in a fresh copy of the demo
//     deployment (one per page, in page order) with its output compared
//     line by line; `sh serve` runs against `host serve` on that copy
//     (localhost:7427 is its address), `sh status=N` expects exit status N
//     of every command. sh without "$ " lines: make targets, run with -n.
//   - hcl: a host config. One that declares no capability or pack loads
//     without a problem; one that does is checked by `host validate` on
//     the demo deployment (plugins started, their config blocks decoded
//     with their own schema): a whole file when it has a host block or
//     `file=NAME`, otherwise each block replaces the block of the same
//     label in host.hcl.example (or is added to it).
//   - json: valid JSON; `shape=` decodes it strictly into the Go type of
//     that shape, `file=PATH` must equal a file of the repository,
//     `holds=PATH` must be held by one, `holds=advertisement` and
//     `holds=plugins` by what the demo deployment prints.
//   - go, go-mod: compiled with go vet in a module of their own that
//     depends on the SDK as the page's go-mod block says (a replace
//     directive); `file=PATH` must also equal that file of the repository;
//     a block without a package clause is a fragment of the tests of the
//     package above it.
//   - prompt: a .prompt file the prompt library accepts.
//   - layout: the source layout, each directory named must exist and
//     every package directory of core/ and plugins/ must be named.
//   - wat: a WebAssembly text module; `file=PATH` names the file of the
//     repository it must equal.
func TestDocPages(t *testing.T) {
	root := moduleRoot(t)
	for _, page := range docPages(t, root) {
		if _, ok := dedicatedPages[page]; ok {
			continue
		}
		// A slash in a subtest's name would split it for -run.
		t.Run(strings.ReplaceAll(page, "/", ":"), func(t *testing.T) {
			p := &pageRun{root: root, page: page}
			blocks := fencedBlocks(t, root, page)
			if needsDemo(blocks) && !testing.Short() {
				// Made here, not in the first block that needs it: a
				// subtest's temporary directory goes when it ends.
				p.d, p.ids = newDemo(t), idMap{}
			}
			for _, b := range blocks {
				fi := parseInfo(b.lang)
				name := fmt.Sprintf("%d_%s", b.line, fi.lang)
				ok := t.Run(name, func(t *testing.T) { p.check(t, fi, b) })
				if !ok && fi.lang == "sh" {
					t.Fatalf("%s:%d failed; the blocks after it may depend on it", page, b.line)
				}
			}
			if len(p.goBlocks) > 0 {
				t.Run("go", func(t *testing.T) { p.checkGo(t) })
			}
		})
	}
}

// pageRun is the state of one page's check: its demo deployment, made on
// first use, the run ids its transcripts paired, and its Go blocks.
type pageRun struct {
	root, page string
	d          *demo
	ids        idMap
	goBlocks   []goBlock
	goMod      string
}

type goBlock struct {
	info fenceInfo
	text string
	line int
}

func (p *pageRun) demo(t *testing.T) *demo {
	t.Helper()
	if p.d == nil {
		if testing.Short() {
			t.Skip("runs in the demo deployment")
		}
		t.Fatal("needsDemo missed a block that needs the demo deployment")
	}
	return p.d
}

// needsDemo reports whether a page has a block that runs in the demo
// deployment: a transcript, a config with plugins or packs, or JSON held
// by what the deployment prints.
func needsDemo(blocks []codeBlock) bool {
	for _, b := range blocks {
		fi := parseInfo(b.lang)
		switch {
		case fi.lang == "sh" && len(transcript(b.text)) > 0,
			fi.lang == "hcl" && regexp.MustCompile(`(?m)^(capability|pack) `).MatchString(b.text),
			fi.lang == "json" && (fi.attrs["holds"] == "advertisement" || fi.attrs["holds"] == "plugins"):
			return true
		}
	}
	return false
}

func (p *pageRun) check(t *testing.T, fi fenceInfo, b codeBlock) {
	switch fi.lang {
	case "sh":
		if len(transcript(b.text)) == 0 {
			checkMakeTargets(t, p.root, b.text)
			return
		}
		status := 0
		if s, ok := fi.attrs["status"]; ok {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("status=%q", s)
			}
			status = n
		}
		p.demo(t).checkShell(t, p.root, p.ids, b.text, status, hasAttr(fi, "serve"))
	case "hcl":
		p.checkHCL(t, fi, b.text)
	case "json":
		p.checkJSON(t, fi, b.text)
	case "go":
		p.goBlocks = append(p.goBlocks, goBlock{info: fi, text: b.text, line: b.line})
	case "go-mod":
		if p.goMod != "" {
			t.Fatal("a second go-mod block on the page")
		}
		p.goMod = b.text
	case "prompt":
		if _, err := promptfile.Parse([]byte(b.text + "\n")); err != nil {
			t.Errorf("the prompt library refuses the file: %v", err)
		}
	case "layout":
		checkLayout(t, p.root, b.text)
	case "wat":
		checkRepositoryFile(t, p.root, fi, b.text)
	default:
		t.Errorf("a %q block: no checker for it (see TestDocPages for those there are)", fi.lang)
	}
}

// checkRepositoryFile checks a block that shows a file of the repository
// whole: file=PATH names it and the text must be its text. A WebAssembly
// text module is one (core/wasm's TestFixturesMatchTheirSource compiles
// it and compares it with the .wasm beside it).
func checkRepositoryFile(t *testing.T, root string, fi fenceInfo, text string) {
	rel, ok := fi.attrs["file"]
	if !ok {
		t.Errorf("a %s block must name the file it shows with file=PATH", fi.lang)
		return
	}
	want, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimRight(string(want), "\n") != strings.TrimRight(text, "\n") {
		t.Errorf("the block is not the text of %s", rel)
	}
}

func hasAttr(fi fenceInfo, k string) bool {
	_, ok := fi.attrs[k]
	return ok
}

// checkMakeTargets runs each line of an sh block, a make command, dry.
func checkMakeTargets(t *testing.T, root, text string) {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		words := strings.Fields(cmd)
		if len(words) == 0 {
			continue
		}
		if words[0] != "make" || len(words) != 2 {
			t.Errorf("%q: an sh block without \"$ \" lines may hold only make TARGET lines", line)
			continue
		}
		n++
		out, err := exec.Command("make", "-C", root, "-n", words[1]).CombinedOutput()
		if err != nil {
			t.Errorf("make -n %s: %v\n%s", words[1], err, out)
		}
	}
	if n == 0 {
		t.Error("an sh block with no command")
	}
}

// goBuildOut matches the start of a `go build -o OUT` command line.
var goBuildOut = regexp.MustCompile(`^go build -o (\S+) `)

// checkShell runs the "$ " commands of a transcript in one bash process
// in the deployment (so a variable one sets is there for the next), each
// with its stdout and stderr together, and compares what each printed
// with the lines shown: empty lines aside, a line "…" stands for any
// lines, a "…" inside a line for any text, and run ids pair up as in
// idMap. A `go build -o OUT PKG` runs in the checkout (root) with OUT
// in the deployment, as in a checkout both are one directory. With serve,
// `host serve` runs on a copy of host.hcl.example for the block, and
// localhost:7427 in a command is its address.
func (d *demo) checkShell(t *testing.T, root string, ids idMap, text string, wantStatus int, serve bool) {
	t.Helper()
	steps := transcript(text)
	addr := ""
	if serve {
		var stop func()
		addr, stop = d.serve(t)
		defer stop()
	}
	var script strings.Builder
	for i, s := range steps {
		cmd := ids.substitute(s.command)
		if m := goBuildOut.FindStringSubmatch(cmd); m != nil {
			cmd = fmt.Sprintf("go -C %s build -o %s %s", shellQuote(root), shellQuote(filepath.Join(d.root, m[1])), strings.TrimPrefix(cmd, m[0]))
		}
		if serve {
			cmd = strings.ReplaceAll(cmd, "localhost:7427", addr)
		}
		fmt.Fprintf(&script, "printf '\\n@@step %d\\n'\n{ %s\n} 2>&1\nprintf '\\n@@status %d %%d\\n' $?\n", i, cmd, i)
	}
	bash := exec.Command("bash", "-c", script.String())
	bash.Dir = d.root
	var out bytes.Buffer
	bash.Stdout, bash.Stderr = &out, &out
	if err := bash.Run(); err != nil {
		t.Fatalf("bash: %v\n%s", err, out.String())
	}
	outputs := map[int][]string{}
	statuses := map[int]int{}
	cur := -1
	for _, line := range strings.Split(out.String(), "\n") {
		line = strings.TrimRight(line, "\r")
		var i, st int
		if n, _ := fmt.Sscanf(line, "@@step %d", &i); n == 1 && strings.HasPrefix(line, "@@step ") {
			cur = i
			continue
		}
		if n, _ := fmt.Sscanf(line, "@@status %d %d", &i, &st); n == 2 && strings.HasPrefix(line, "@@status ") {
			statuses[i] = st
			cur = -1
			continue
		}
		if cur >= 0 && line != "" {
			outputs[cur] = append(outputs[cur], line)
		}
	}
	for i, s := range steps {
		st, ok := statuses[i]
		if !ok {
			t.Fatalf("%s: did not finish:\n%s", s.command, out.String())
		}
		if st != wantStatus && !isAssignment(s.command) {
			t.Errorf("%s: exit status %d, want %d\n%s", s.command, st, wantStatus, strings.Join(outputs[i], "\n"))
		}
		if err := ids.matchLines(s.output, outputs[i], d.root); err != nil {
			t.Errorf("%s: %v\nthe whole output:\n%s", s.command, err, strings.Join(outputs[i], "\n"))
		}
	}
}

// isAssignment reports whether a command only sets a shell variable.
func isAssignment(cmd string) bool {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(cmd) && !strings.Contains(cmd, " ")
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// serve starts `host serve` on a copy of host.hcl.example listening on a
// free port, waits until it is ready, and returns its address and a stop
// function.
func (d *demo) serve(t *testing.T) (string, func()) {
	t.Helper()
	cfg, addr := d.configWithListen(t)
	stop, err := testbin.ServeDemo(d.root, cfg, addr)
	if err != nil {
		t.Fatal(err)
	}
	return addr, stop
}

// envCall matches env("NAME"), the variables a config block reads.
var envCall = regexp.MustCompile(`env\("([A-Za-z_][A-Za-z0-9_]*)"\)`)

// checkHCL checks an hcl block as a host config (see TestDocPages).
func (p *pageRun) checkHCL(t *testing.T, fi fenceInfo, text string) {
	f, diags := hclsyntax.ParseConfig([]byte(text), "block.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("not HCL: %s", diags.Error())
	}
	var hasHost, hasPlugins bool
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		switch b.Type {
		case "host":
			hasHost = true
		case "capability", "pack":
			hasPlugins = true
		}
	}
	env := []string{}
	for _, m := range envCall.FindAllStringSubmatch(text, -1) {
		env = append(env, m[1]+"=doc-"+strings.ToLower(m[1]))
	}
	if !hasPlugins {
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		path := filepath.Join(t.TempDir(), "host.hcl")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, diags := config.NewLoader().Load(path); diags.HasErrors() {
			t.Fatalf("the block does not load:\n%s", config.FormatDiagnostics(diags))
		}
		return
	}
	d := p.demo(t)
	name, whole := fi.attrs["file"]
	src := []byte(text + "\n")
	if !whole && !hasHost {
		example, err := os.ReadFile(filepath.Join(d.root, "host.hcl.example"))
		if err != nil {
			t.Fatal(err)
		}
		src = spliceBlocks(t, example, []byte(text))
	}
	if name == "" {
		name = "doc.hcl"
	}
	if err := os.WriteFile(filepath.Join(d.root, name), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(d.root, "bin", "host"), "--config", name, "validate")
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("host validate: %v\n%s\nthe config:\n%s", err, out, src)
	}
}

// spliceBlocks returns base with each top-level block of frag put in
// place of the block of base with the same type and labels, or appended.
func spliceBlocks(t *testing.T, base, frag []byte) []byte {
	t.Helper()
	parse := func(src []byte) []*hclsyntax.Block {
		f, diags := hclsyntax.ParseConfig(src, "x.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("not HCL: %s", diags.Error())
		}
		return f.Body.(*hclsyntax.Body).Blocks
	}
	key := func(b *hclsyntax.Block) string { return b.Type + " " + strings.Join(b.Labels, " ") }
	baseBlocks := map[string]*hclsyntax.Block{}
	for _, b := range parse(base) {
		baseBlocks[key(b)] = b
	}
	type cut struct {
		start, end int
		text       []byte
	}
	var cuts []cut
	var added []byte
	for _, b := range parse(frag) {
		r := b.Range()
		text := frag[r.Start.Byte:r.End.Byte]
		if old, ok := baseBlocks[key(b)]; ok {
			or := old.Range()
			cuts = append(cuts, cut{or.Start.Byte, or.End.Byte, text})
			continue
		}
		added = append(append(added, '\n'), append(text, '\n')...)
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].start > cuts[j].start })
	out := append([]byte(nil), base...)
	for _, c := range cuts {
		out = append(out[:c.start:c.start], append(append([]byte(nil), c.text...), out[c.end:]...)...)
	}
	return append(out, added...)
}

// jsonShapes decode a json block strictly as the Go value it shows.
var jsonShapes = map[string]func([]byte) error{
	"ctx-error":  func(b []byte) error { return strictDecode(b, &wop.Error{}) },
	"http-error": func(b []byte) error { return strictDecode(b, &httpstatus.Envelope{}) },
	"run-outcome": func(b []byte) error {
		var o httpstatus.Outcome
		if err := strictDecode(b, &o); err != nil {
			return err
		}
		if o.Status != httpstatus.OutcomeSucceeded && o.Status != httpstatus.OutcomeFailed {
			return fmt.Errorf("status %q", o.Status)
		}
		return nil
	},
	"run-record": func(b []byte) error {
		var r host.RunRecord
		if err := strictDecode(b, &r); err != nil {
			return err
		}
		if !host.IsRunID(r.RunID) {
			return fmt.Errorf("runId %q is not a run id", r.RunID)
		}
		return nil
	},
	"run-page": func(b []byte) error {
		var p host.RunPage
		if err := strictDecode(b, &p); err != nil {
			return err
		}
		for _, r := range p.Runs {
			if !host.IsRunID(r.RunID) {
				return fmt.Errorf("runId %q is not a run id", r.RunID)
			}
		}
		return nil
	},
	"agent-manifest": func(b []byte) error { _, err := agentruntime.ParseManifest(b); return err },
	"local-rules":    func(b []byte) error { _, err := local.Parse(b); return err },
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one value")
	}
	return nil
}

// checkJSON checks a json block: each value of it (a block may show
// several, one a line) is valid JSON, and what its attributes say.
func (p *pageRun) checkJSON(t *testing.T, fi fenceInfo, text string) {
	dec := json.NewDecoder(strings.NewReader(text))
	var values []json.RawMessage
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		t.Fatal("an empty json block")
	}
	for k, v := range fi.attrs {
		switch k {
		case "shape":
			decode, ok := jsonShapes[v]
			if !ok {
				t.Fatalf("no shape %q", v)
			}
			for _, val := range values {
				if err := decode(val); err != nil {
					t.Errorf("not a %s: %v\n%s", v, err, val)
				}
			}
		case "file":
			want, err := os.ReadFile(filepath.Join(p.root, v))
			if err != nil {
				t.Fatal(err)
			}
			if len(values) != 1 || !jsonEqual(t, values[0], want) {
				t.Errorf("not the JSON of %s:\n%s", v, want)
			}
		case "holds":
			for _, val := range values {
				p.checkHolds(t, v, val)
			}
		default:
			t.Errorf("a json block's attribute %q: only shape, file and holds are checked", k)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(va, vb)
}

// checkHolds checks that what the block shows is held by the source it
// names: a file of the repository, the demo deployment's advertisement,
// or one of its capabilities (the one with the same name).
func (p *pageRun) checkHolds(t *testing.T, source string, shown json.RawMessage) {
	var want any
	if err := json.Unmarshal(shown, &want); err != nil {
		t.Fatal(err)
	}
	var got any
	switch source {
	case "advertisement":
		out := p.demo(t).mustRun(t, "bin/host --config host.hcl.example --json capabilities")
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
	case "plugins":
		out := p.demo(t).mustRun(t, "bin/host --config host.hcl.example --json plugins")
		var list []map[string]any
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		name, _ := want.(map[string]any)["name"].(string)
		for _, c := range list {
			if c["name"] == name {
				got = c
			}
		}
		if got == nil {
			t.Fatalf("no capability %q in %s", name, out)
		}
	default:
		b, err := os.ReadFile(filepath.Join(p.root, source))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
	}
	if err := holdsExactly(got, want, "$"); err != nil {
		t.Error(err)
	}
}

// holdsExactly is holds for documents without run ids: objects member by
// member (got may have more), anything else equal, and a string "…"
// stands for any value.
func holdsExactly(got, want any, at string) error {
	if w, ok := want.(string); ok && w == ellipsis {
		return nil
	}
	if w, ok := want.(map[string]any); ok {
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %v is not an object", at, got)
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: no member %q", at, k)
			}
			if err := holdsExactly(gv, v, at+"."+k); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: %v, want %v", at, got, want)
	}
	return nil
}

// checkLayout checks a source layout: on each line, the words ending in
// "/" before the first that does not are directories, those of an
// indented line inside the directory of the last line that was not; each
// must exist, and every directory under core/ and plugins/ must be named.
func checkLayout(t *testing.T, root, text string) {
	named := map[string]bool{}
	parent := ""
	for _, line := range strings.Split(text, "\n") {
		indented := strings.HasPrefix(line, " ")
		for _, w := range strings.Fields(line) {
			if !strings.HasSuffix(w, "/") {
				break
			}
			dir := strings.TrimSuffix(w, "/")
			if indented {
				dir = parent + "/" + dir
			} else {
				parent = dir
			}
			named[dir] = true
			if fi, err := os.Stat(filepath.Join(root, dir)); err != nil || !fi.IsDir() {
				t.Errorf("%s/ is not a directory of the repository", dir)
			}
		}
	}
	for _, top := range []string{"core", "plugins"} {
		entries, err := os.ReadDir(filepath.Join(root, top))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !named[top+"/"+e.Name()] {
				t.Errorf("%s/%s/ is not in the layout", top, e.Name())
			}
		}
	}
}
