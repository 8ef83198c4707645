package docs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// conformancePath is the page on `host conformance`.
const conformancePath = "docs/conformance.md"

// TestConformanceDocBlocks checks every fenced block of the page in the
// demo deployment, with the kv example's conformance file and the kit's
// bad plugin (as bin/badplugin) added: the sh transcripts run with their
// output compared line by line, blank lines aside (exit status 1 only
// where the output shown has a FAIL line); the first HCL block is the kv
// example's conformance file verbatim and passes; every HCL block is a
// conformance file the command reads without an error; the JSON block is
// one in HCL's JSON form under which the kv plugin passes.
func TestConformanceDocBlocks(t *testing.T) {
	root := moduleRoot(t)
	blocks := fencedBlocks(t, root, conformancePath)
	if len(blocks) == 0 {
		t.Fatalf("%s has no code blocks", conformancePath)
	}
	d := newDemo(t)
	kvFile := "examples/plugins/kv/conformance.hcl"
	if err := os.MkdirAll(filepath.Join(d.root, filepath.Dir(kvFile)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testbin.CopyFile(testbin.SourceDir(kvFile), filepath.Join(d.root, kvFile)); err != nil {
		t.Fatal(err)
	}
	if err := testbin.Build(map[string]string{filepath.Join(d.root, "bin", "badplugin"): "github.com/wophost/wophost/sdk/plugintest/internal/badplugin"}); err != nil {
		t.Fatal(err)
	}
	kv, err := os.ReadFile(testbin.SourceDir(kvFile))
	if err != nil {
		t.Fatal(err)
	}
	firstHCL := true
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d %s", conformancePath, b.line, b.lang), func(t *testing.T) {
			switch b.lang {
			case "sh":
				checkConformanceTranscript(t, d, b.text)
			case "hcl":
				if firstHCL && b.text != strings.TrimRight(string(kv), "\n") {
					t.Errorf("the first hcl block is not %s verbatim", kvFile)
				}
				checkConformanceFile(t, d, "conformance.hcl", b.text, firstHCL)
				firstHCL = false
			case "json":
				checkConformanceFile(t, d, "conformance.json", b.text, true)
			default:
				t.Errorf("a %q block: only sh, hcl and json blocks are checked, so only they may appear", b.lang)
			}
		})
	}
}

// checkConformanceTranscript runs each command of an sh block with sh in
// d and compares its output, blank lines left out, with the lines shown.
func checkConformanceTranscript(t *testing.T, d *demo, text string) {
	t.Helper()
	steps := transcript(text)
	if len(steps) == 0 {
		t.Fatal("an sh block without a \"$ \" command")
	}
	for _, s := range steps {
		if !strings.HasPrefix(s.command, "bin/host conformance ") {
			t.Fatalf("%q: the transcripts run bin/host conformance", s.command)
		}
		cmd := exec.Command("sh", "-c", s.command)
		cmd.Dir = d.root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		status := 0
		if ee, ok := err.(*exec.ExitError); ok {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, line := range strings.Split(out.String(), "\n") {
			if line != "" {
				got = append(got, line)
			}
		}
		want := 0
		for _, line := range s.output {
			if strings.HasPrefix(line, "FAIL ") {
				want = 1
			}
		}
		if status != want {
			t.Errorf("%s: exit status %d, want %d", s.command, status, want)
		}
		if err := (idMap{}).matchLines(s.output, got, d.root); err != nil {
			t.Errorf("%s: %v\nthe whole output:\n%s", s.command, err, out.String())
		}
	}
}

// checkConformanceFile writes text as the conformance file name and runs
// `host conformance` with it on the kv plugin: it must read without an
// error (exit 2 and diagnostics on stderr would say otherwise), and when
// pass is set the plugin must pass.
func checkConformanceFile(t *testing.T, d *demo, name, text string, pass bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(d.root, "bin", "host"), "conformance", "--config", path, filepath.Join(d.root, "bin", "wophost-kv"))
	cmd.Dir = d.root
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	status := 0
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if status == 2 || errOut.Len() > 0 {
		t.Fatalf("the block is no conformance file: exit %d\n%s", status, errOut.String())
	}
	if pass && status != 0 {
		t.Errorf("the kv plugin fails under the block: exit %d\n%s", status, out.String())
	}
}

// `make conformance` builds what it needs on a fresh clone, as
// docs/conformance.md says: the plugins' conformance run installs the
// Node.js example plugin's packages (npm ci) before it runs `host
// conformance` on it, as on every other plugin. make -B shows every
// step, as on a clone where none was made yet.
func TestConformanceTargetInstallsWhatItRuns(t *testing.T) {
	root := moduleRoot(t)
	for _, target := range []string{"conformance-plugins", "conformance"} {
		out, err := exec.Command("make", "-C", root, "-n", "-B", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n -B %s: %v\n%s", target, err, out)
		}
		text := string(out)
		npm := strings.Index(text, "npm ci ")
		run := strings.Index(text, "bin/host conformance --config")
		build := strings.Index(text, "-o bin/host ./cmd/host")
		switch {
		case run < 0:
			t.Errorf("make -n -B %s runs no host conformance:\n%s", target, text)
		case npm < 0 || npm > run:
			t.Errorf("make -n -B %s does not install the Node.js plugin's packages (npm ci) before host conformance:\n%s", target, text)
		case build < 0 || build > run:
			t.Errorf("make -n -B %s does not build the host before host conformance:\n%s", target, text)
		}
	}
}
