package docs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/wophost/wophost/internal/scaffold"
	"github.com/wophost/wophost/test/testbin"
)

// startingPointsPath is the page on `host new`.
const startingPointsPath = "docs/starting-points.md"

// docHome is the home directory the page's transcripts show.
const docHome = "/home/you"

// docSDKVersion is the version of the SDK the page's transcripts require,
// which ~/wophost/dist/goproxy serves: the commit its sdk/ tag names once
// there is one, else the checkout's HEAD.
const docSDKVersion = "v0.1.0"

// TestStartingPointsDocBlocks checks every fenced block of the page: the sh
// transcripts run in order in a home directory of their own, laid out as
// the page says (the checkout's host built into ~/wophost/bin, its SDK at
// ~/wophost/sdk, the SDK module at docSDKVersion in ~/wophost/dist/goproxy
// as `make sdk-proxy` writes it, each transcript starting in ~/src), with
// the output compared line by line once the home directory reads
// /home/you; the JSON block is the pack.json the pack transcript wrote,
// byte for byte; each go.mod block is the go.mod `host new plugin` writes,
// before go mod tidy: for the checkout it replaces the SDK with, or for the
// SDK version it requires when it has no replace line.
func TestStartingPointsDocBlocks(t *testing.T) {
	root := moduleRoot(t)
	blocks := fencedBlocks(t, root, startingPointsPath)
	if len(blocks) == 0 {
		t.Fatalf("%s has no code blocks", startingPointsPath)
	}
	if testing.Short() {
		t.Skip("builds the host and the modules the page writes")
	}
	testbin.NeedGitCheckout(t)
	h := newHome(t, root)
	ids := idMap{}
	for _, b := range blocks {
		name := fmt.Sprintf("%s:%d %s", startingPointsPath, b.line, b.lang)
		ok := t.Run(name, func(t *testing.T) {
			switch b.lang {
			case "sh":
				h.checkTranscript(t, ids, b.text)
			case "json":
				h.checkFile(t, b.text, "src/notes/pack.json")
			case "go.mod":
				h.checkGoMod(t, b.text)
			default:
				t.Errorf("a %q block: only sh, json and go.mod blocks are checked, so only they may appear", b.lang)
			}
		})
		if !ok && b.lang == "sh" {
			t.Fatalf("%s failed; the blocks after it depend on what it wrote", name)
		}
	}
}

// home is a home directory laid out as the page's reader has it.
type home struct {
	dir string
	// env is the go command's environment: a module cache of the page's
	// own (see testbin.ModuleEnv), which keeps the SDK version that
	// ~/wophost/dist/goproxy serves out of the user's.
	env []string
	// proxy is the GOPROXY of env, which stands for the page's
	// https://proxy.golang.org,direct (the machine's GOPROXY after the
	// user's module cache).
	proxy string
}

func newHome(t *testing.T, root string) *home {
	t.Helper()
	// The host reports paths it resolved, so the directory must be
	// spelled as the kernel spells it.
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := testbin.Build(map[string]string{filepath.Join(dir, "wophost", "bin", "host"): testbin.HostPackage}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "sdk"), filepath.Join(dir, "wophost", "sdk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := testbin.SDKProxy(t.TempDir(), filepath.Join(dir, "wophost", "dist", "goproxy"), docSDKVersion); err != nil {
		t.Fatal(err)
	}
	h := &home{dir: dir}
	if h.env, err = testbin.ModuleEnv(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, kv := range h.env {
		if v, ok := strings.CutPrefix(kv, "GOPROXY="); ok {
			h.proxy = v
		}
	}
	return h
}

// commandEnv returns the environment of a go command with the page's
// assignments (with $HOME the home directory) in place. A GOPROXY shown
// keeps its file:// directories, and the machine's proxy, behind the
// user's module cache, takes the place of the rest
// (https://proxy.golang.org,direct).
func (h *home) commandEnv(assignments []string) []string {
	env := slices.Clone(h.env)
	for _, a := range assignments {
		k, v, _ := strings.Cut(strings.ReplaceAll(a, "$HOME", h.dir), "=")
		if k == "GOPROXY" {
			var dirs []string
			for _, p := range strings.Split(v, ",") {
				if strings.HasPrefix(p, "file://") {
					dirs = append(dirs, p)
				}
			}
			v = strings.Join(append(dirs, h.proxy), ",")
		}
		env = append(env, k+"="+v)
	}
	return env
}

// shown replaces the home directory with the page's.
func (h *home) shown(s string) string { return strings.ReplaceAll(s, h.dir, docHome) }

// goTestLine is a package line of go test's output, whose time varies.
var goTestLine = regexp.MustCompile(`^ok\s+(\S+)\s+(?:\d+(?:\.\d+)?s|\(cached\))$`)

// comparable returns a line with what varies between runs of go test
// made equal.
func comparable(line string) string {
	return goTestLine.ReplaceAllString(line, "ok $1 TIME")
}

// checkTranscript runs the commands of an sh transcript from ~/src, and
// compares each one's stdout followed by its stderr with the lines shown.
// Commands are `cd DIR`, go and ~/wophost/bin/host, optionally fed by
// `echo 'TEXT' |`; a go command may follow VAR=value assignments.
func (h *home) checkTranscript(t *testing.T, ids idMap, text string) {
	t.Helper()
	steps := transcript(text)
	if len(steps) == 0 {
		t.Fatal("an sh block without a \"$ \" command")
	}
	cwd := filepath.Join(h.dir, "src")
	for _, s := range steps {
		line := s.command
		var stdin string
		if echo, rest, ok := strings.Cut(line, " | "); ok {
			quoted, ok := strings.CutPrefix(echo, "echo '")
			if !ok || !strings.HasSuffix(quoted, "'") {
				t.Fatalf("%q: only echo 'TEXT' may feed a command", line)
			}
			stdin, line = strings.TrimSuffix(quoted, "'")+"\n", rest
		}
		words := strings.Fields(line)
		var assignments []string
		for len(words) > 1 && assignment.MatchString(words[0]) {
			assignments, words = append(assignments, words[0]), words[1:]
		}
		if len(assignments) > 0 && words[0] != "go" {
			t.Fatalf("%q: only a go command takes assignments", s.command)
		}
		for i, w := range words {
			if rest, ok := strings.CutPrefix(w, "~/"); ok {
				words[i] = filepath.Join(h.dir, rest)
			}
		}
		if words[0] == "cd" && len(words) == 2 {
			cwd = filepath.Join(cwd, words[1])
			if len(s.output) > 0 {
				t.Errorf("%s: cd prints nothing", s.command)
			}
			continue
		}
		if words[0] != "go" && words[0] != filepath.Join(h.dir, "wophost", "bin", "host") {
			t.Fatalf("%q: transcripts run cd, go and ~/wophost/bin/host", s.command)
		}
		cmd := exec.Command(words[0], words[1:]...)
		cmd.Dir = cwd
		cmd.Env = h.commandEnv(assignments)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s%s", s.command, err, stdout.String(), stderr.String())
		}
		var got []string
		if out := strings.TrimRight(h.shown(stdout.String()+stderr.String()), "\n"); out != "" {
			got = strings.Split(out, "\n")
		}
		want := slices.Clone(s.output)
		for i := range want {
			want[i] = comparable(want[i])
		}
		for i := range got {
			got[i] = comparable(got[i])
		}
		// The home directory is already the page's: the root given
		// here occurs nowhere.
		if err := ids.matchLines(want, got, h.dir); err != nil {
			t.Errorf("%s: %v\nthe whole output:\n%s", s.command, err, strings.Join(got, "\n"))
		}
	}
}

// checkFile compares a block with a file a transcript wrote, rel to the
// home directory.
func (h *home) checkFile(t *testing.T, text, rel string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(h.dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	if want := text + "\n"; string(got) != want {
		t.Errorf("~/%s differs from the block:\n%s", rel, got)
	}
}

// checkGoMod compares the block with the go.mod `host new plugin greet`
// writes against ~/wophost/sdk, or, for a block without a replace line,
// for the SDK version it requires.
func (h *home) checkGoMod(t *testing.T, text string) {
	t.Helper()
	f, err := modfile.Parse("go.mod", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := scaffold.Plugin{Name: "greet", Family: "acme.greet", SDKDir: filepath.Join(h.dir, "wophost", "sdk")}
	if len(f.Replace) == 0 {
		if len(f.Require) != 1 {
			t.Fatalf("a go.mod block without a replace line requires %d modules; want the SDK alone", len(f.Require))
		}
		p.SDKDir, p.SDKVersion = "", f.Require[0].Mod.Version
	}
	dir := filepath.Join(t.TempDir(), "greet")
	if _, err := scaffold.WritePlugin(dir, p); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := text + "\n"; h.shown(string(got)) != want {
		t.Errorf("the go.mod written differs from the block:\n%s", h.shown(string(got)))
	}
}

// flagRow is a row of the page's flags table: the flag, then "both",
// "plugin" or "pack".
var flagRow = regexp.MustCompile("(?m)^\\| `--([a-z-]+)[^`]*` \\| (both|plugin|pack) \\|")

// helpFlag is a flag in a command's help.
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z-]+)`)

// The page's flags table lists every flag of `host new plugin` and `host
// new pack` (help and the global flags aside), each under the commands
// that take it.
func TestStartingPointsFlags(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, startingPointsPath))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, m := range flagRow.FindAllStringSubmatch(string(doc), -1) {
		for _, cmd := range []string{"plugin", "pack"} {
			if m[2] == "both" || m[2] == cmd {
				documented[cmd] = append(documented[cmd], m[1])
			}
		}
	}
	for _, cmd := range []string{"plugin", "pack"} {
		help := exec.Command("go", "run", "./cmd/host", "new", cmd, "--help")
		help.Dir = root
		out, err := help.Output()
		if err != nil {
			t.Fatalf("host new %s --help: %v", cmd, err)
		}
		local, _, _ := strings.Cut(string(out), "Global Flags:")
		var flags []string
		for _, m := range helpFlag.FindAllStringSubmatch(local, -1) {
			if m[1] != "help" {
				flags = append(flags, m[1])
			}
		}
		slices.Sort(flags)
		doc := slices.Sorted(slices.Values(documented[cmd]))
		if !slices.Equal(flags, doc) {
			t.Errorf("host new %s takes %q; the page's table lists %q", cmd, flags, doc)
		}
	}
}
