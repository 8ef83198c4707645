// Package docs_test checks docs/contract.md against the code that cites it:
// every section a Go comment cites exists, and every code block of the
// document is valid.
package docs_test

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// contractPath is the document, relative to the module root.
const contractPath = "docs/contract.md"

// citation matches a citation of a section of the document in Go source:
// its path, a space, "§" and the section number ("4" or "4.2"), which is
// the first group.
var citation = regexp.MustCompile(regexp.QuoteMeta(contractPath) + ` §(\d+(?:\.\d+)?)`)

// oldCitation is the form the code used while the contract lived outside
// the repository; nothing may cite it any more.
var oldCitation = regexp.MustCompile(`CONTRACT` + ` §`)

// heading matches a numbered section heading of the document,
// "## 4. The families" or "### 4.2 promptLibrary".
var heading = regexp.MustCompile(`^#{2,6} (\d+(?:\.\d+)?)\.? `)

// moduleRoot walks up from the test's directory to the directory holding
// the main module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// sections returns the section numbers of the document's headings.
func sections(t *testing.T, root string) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(root, contractPath))
	if err != nil {
		t.Fatalf("open the contract: %v", err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := heading.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the contract: %v", err)
	}
	return out
}

// TestContractCitationsExist walks every .go file of the repository (the
// sdk module included) and checks that each section of docs/contract.md it
// cites is a heading of the document, and that no comment still cites the
// old, out-of-repository CONTRACT.
func TestContractCitationsExist(t *testing.T) {
	root := moduleRoot(t)
	have := sections(t, root)
	if len(have) == 0 {
		t.Fatalf("%s has no numbered section headings", contractPath)
	}
	cited := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range citation.FindAllStringSubmatch(line, -1) {
				cited++
				if !have[m[1]] {
					t.Errorf("%s:%d cites %s §%s, which has no such section", rel, i+1, contractPath, m[1])
				}
			}
			if oldCitation.MatchString(line) {
				t.Errorf("%s:%d cites the old CONTRACT; cite %s §N.N instead", rel, i+1, contractPath)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	if cited == 0 {
		t.Fatalf("no .go file under %s cites %s; the walk found nothing to check", root, contractPath)
	}
}

// TestContractCodeBlocks checks every fenced code block of the document:
// each must be a json block holding valid JSON, so that no example in it
// can drift into something a client could not parse.
func TestContractCodeBlocks(t *testing.T) {
	for _, b := range fencedBlocks(t, moduleRoot(t), contractPath) {
		if b.lang != "json" {
			t.Errorf("%s:%d: a %q code block; only json blocks are checked, so only they may appear", contractPath, b.line, b.lang)
			continue
		}
		if !json.Valid([]byte(b.text)) {
			var v any
			err := json.Unmarshal([]byte(b.text), &v)
			t.Errorf("%s:%d: the json block is not valid JSON: %v", contractPath, b.line, err)
		}
	}
}
