package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// configurationPath is the configuration reference.
const configurationPath = "docs/configuration.md"

// hclTag matches the name of an attribute or block a core/config struct
// decodes: `hcl:"NAME"` or `hcl:"NAME,block"` (and the like); labels and
// the catch-alls have a kind but no name of their own here.
var hclTag = regexp.MustCompile(`hcl:"([a-z_0-9]+)(?:,([a-z_]+))?"`)

// TestConfigurationReferenceCoversEveryAttribute checks that every
// attribute and block the host's config decodes (the hcl tags of
// core/config) is shown, set or commented out, in an hcl block of the
// configuration reference, so that a new setting cannot go undocumented
// as the http block once did.
func TestConfigurationReferenceCoversEveryAttribute(t *testing.T) {
	root := moduleRoot(t)
	var shown strings.Builder
	for _, b := range fencedBlocks(t, root, configurationPath) {
		if parseInfo(b.lang).lang == "hcl" {
			shown.WriteString(b.text + "\n")
		}
	}
	sources, err := filepath.Glob(filepath.Join(root, "core", "config", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range hclTag.FindAllStringSubmatch(string(src), -1) {
			if m[2] == "label" {
				continue
			}
			names[m[1]] = true
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d hcl tags found under core/config; the scan is broken", len(names))
	}
	for name := range names {
		setting := regexp.MustCompile(`(?m)^\s*#?\s*` + regexp.QuoteMeta(name) + `\s*(=|\{|")`)
		if !setting.MatchString(shown.String()) {
			t.Errorf("%s: no hcl block shows %q, which core/config decodes", configurationPath, name)
		}
	}
}
