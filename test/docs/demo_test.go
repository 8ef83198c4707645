package docs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/wophost/wophost/test/testbin"
)

// demo is the deployment `make build` and `make run` leave in a checkout,
// laid out in a directory of its own: bin/ with the host, the plugins and
// the toolbox MCP server, the example packs with their binaries, the
// examples' inputs, rules and prompts, and host.hcl.example. A document's
// transcripts run there, as a reader runs them in the checkout.
type demo struct {
	root string
}

// demoOnce builds the deployment once per test binary.
var demoOnce struct {
	sync.Once
	dir string
	err error
}

// newDemo returns a fresh copy of the demo deployment in which the prompts
// are published and `host run kvdemo.remember` has run, as after `make
// run`. It skips under -short: the binaries take a while to build.
func newDemo(t *testing.T) *demo {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the demo deployment")
	}
	demoOnce.Do(func() { demoOnce.dir, demoOnce.err = buildDemo() })
	if demoOnce.err != nil {
		t.Fatal(demoOnce.err)
	}
	d := &demo{root: t.TempDir()}
	if err := testbin.CopyTree(demoOnce.dir, d.root); err != nil {
		t.Fatal(err)
	}
	if err := testbin.SetUpDemo(d.root); err != nil {
		t.Fatal(err)
	}
	return d
}

// buildDemo builds the deployment into a temporary directory that lives
// as long as the test binary.
func buildDemo() (string, error) {
	dir, err := os.MkdirTemp("", "wophost-docs-demo-")
	if err != nil {
		return "", err
	}
	return dir, testbin.BuildDemo(dir)
}

// run runs one command line of a transcript in the deployment: words
// split at spaces, the first a path under it. It returns stdout and
// stderr, and the exit status.
func (d *demo) run(t *testing.T, line string) (stdout, stderr string, status int) {
	t.Helper()
	words := strings.Fields(line)
	cmd := exec.Command(filepath.Join(d.root, words[0]), words[1:]...)
	cmd.Dir = d.root
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return out.String(), errOut.String(), status
}

func (d *demo) mustRun(t *testing.T, line string) string {
	t.Helper()
	out, errOut, status := d.run(t, line)
	if status != 0 {
		t.Fatalf("%s: exit status %d\n%s%s", line, status, out, errOut)
	}
	return out
}

// configWithListen writes a copy of host.hcl.example whose API listens on
// a free port, and returns its name and the address.
func (d *demo) configWithListen(t *testing.T) (string, string) {
	t.Helper()
	name := "host.test.hcl"
	addr, err := testbin.DemoConfig(d.root, name)
	if err != nil {
		t.Fatal(err)
	}
	return name, addr
}

// transcriptStep is one "$ command" of a transcript block and the output
// the block shows after it.
type transcriptStep struct {
	command string
	output  []string
}

// transcript splits an sh block into its "$ " commands and their output.
func transcript(text string) []transcriptStep {
	var steps []transcriptStep
	for _, line := range strings.Split(text, "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, transcriptStep{command: cmd})
			continue
		}
		if len(steps) > 0 && line != "" {
			steps[len(steps)-1].output = append(steps[len(steps)-1].output, line)
		}
	}
	return steps
}

// docRoot is where a document shows the checkout in absolute paths.
const docRoot = "/home/you/wophost/"

// runID matches a run id.
var runID = regexp.MustCompile(`run_[0-9a-f]{24}`)

// idMap pairs the run ids a document shows with those its commands made
// here, so that a later command names the run an earlier one made.
type idMap map[string]string

// substitute returns a command with each run id the map knows replaced.
func (m idMap) substitute(cmd string) string {
	return runID.ReplaceAllStringFunc(cmd, func(id string) string {
		if got, ok := m[id]; ok {
			return got
		}
		return id
	})
}

// match compares one shown line with one actual line: equal once the
// checkout's path is the document's, and the run ids pair up with those
// seen before (new ones are paired here).
func (m idMap) match(want, got, root string) error {
	got = strings.ReplaceAll(got, root+string(filepath.Separator), docRoot)
	wantIDs, gotIDs := runID.FindAllString(want, -1), runID.FindAllString(got, -1)
	if len(wantIDs) != len(gotIDs) {
		return fmt.Errorf("got  %s\nwant %s", got, want)
	}
	for i, w := range wantIDs {
		if prev, ok := m[w]; ok && prev != gotIDs[i] {
			return fmt.Errorf("run id %s stands for %s here, but the line has %s:\n%s", w, prev, gotIDs[i], got)
		}
		m[w] = gotIDs[i]
	}
	if !sameText(runID.ReplaceAllString(want, "run_ID"), runID.ReplaceAllString(got, "run_ID")) {
		return fmt.Errorf("got  %s\nwant %s", got, want)
	}
	return nil
}

// sameText compares a shown line with an actual one: equal, or, where the
// shown line has an ellipsis inside it, equal with any text in its place.
func sameText(want, got string) bool {
	if !strings.Contains(want, ellipsis) {
		return want == got
	}
	parts := strings.Split(want, ellipsis)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// checkTranscript runs each command of an sh transcript block in d and
// compares its stdout followed by its stderr with the lines shown.
func (d *demo) checkTranscript(t *testing.T, ids idMap, text string) {
	t.Helper()
	steps := transcript(text)
	if len(steps) == 0 {
		t.Fatal("an sh block without a \"$ \" command")
	}
	for _, s := range steps {
		cmd := ids.substitute(s.command)
		if !strings.HasPrefix(cmd, "bin/host ") {
			t.Fatalf("%q: transcripts run bin/host", s.command)
		}
		stdout, stderr, status := d.run(t, cmd)
		got := strings.Split(strings.TrimRight(stdout+stderr, "\n"), "\n")
		if status != 0 {
			t.Errorf("%s: exit status %d", cmd, status)
		}
		if err := ids.matchLines(s.output, got, d.root); err != nil {
			t.Errorf("%s: %v\nthe whole output:\n%s", s.command, err, strings.Join(got, "\n"))
		}
	}
}

// ellipsis, a line of its own in a transcript, stands for any number of
// lines of output (none included).
const ellipsis = "…"

// matchLines compares the lines a transcript shows with the output: each
// shown line matches one output line (match), and an ellipsis line any
// run of them. Run ids are paired only along the matching found.
func (m idMap) matchLines(want, got []string, root string) error {
	if len(want) == 0 {
		if len(got) != 0 {
			return fmt.Errorf("%d lines more than the document shows, from %q", len(got), got[0])
		}
		return nil
	}
	if want[0] == ellipsis {
		for skip := 0; skip <= len(got); skip++ {
			trial := m.clone()
			if trial.matchLines(want[1:], got[skip:], root) == nil {
				for k, v := range trial {
					m[k] = v
				}
				return nil
			}
		}
		return fmt.Errorf("no lines after %q match %q", ellipsis, want[1:])
	}
	if len(got) == 0 {
		return fmt.Errorf("the output ends where the document shows %q", want[0])
	}
	if err := m.match(want[0], got[0], root); err != nil {
		return err
	}
	return m.matchLines(want[1:], got[1:], root)
}

func (m idMap) clone() idMap {
	c := idMap{}
	for k, v := range m {
		c[k] = v
	}
	return c
}
