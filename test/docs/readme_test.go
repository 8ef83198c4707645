package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeAdvertisement is the README's sentence on what `make run`
// advertises; its parenthesis names the families.
var readmeAdvertisement = regexp.MustCompile(`It shows the advertisement \(([^)]*)\)`)

// backticked is a name in backticks.
var backticked = regexp.MustCompile("`([^`]+)`")

// The README names exactly what the demo advertises: every family of
// `host capabilities` on host.hcl.example, at the root and under
// extensions, and nothing but those families, their facets and the word
// extensions.
func TestReadmeNamesTheAdvertisement(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := readmeAdvertisement.FindStringSubmatch(strings.Join(strings.Fields(string(readme)), " "))
	if m == nil {
		t.Fatal("README.md has no sentence \"It shows the advertisement (…)\"")
	}
	var named []string
	for _, n := range backticked.FindAllStringSubmatch(m[1], -1) {
		named = append(named, n[1])
	}

	d := newDemo(t)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(d.mustRun(t, "bin/host --config host.hcl.example --log-level off --json capabilities")), &doc); err != nil {
		t.Fatal(err)
	}
	families := map[string]json.RawMessage{}
	for k, v := range doc {
		switch k {
		case "protocolVersions", "preferredVersion", "implementation":
		case "extensions":
			var ext map[string]json.RawMessage
			if err := json.Unmarshal(v, &ext); err != nil {
				t.Fatal(err)
			}
			for name, rec := range ext {
				families[name] = rec
			}
		default:
			families[k] = v
		}
	}
	// A facet is a key of a family's record beside the record's own.
	facets := map[string]bool{}
	for _, rec := range families {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(rec, &keys); err != nil {
			t.Fatal(err)
		}
		for k := range keys {
			switch k {
			case "status", "since", "until", "witness":
			default:
				facets[k] = true
			}
		}
	}
	for name := range families {
		if !slices.Contains(named, name) {
			t.Errorf("make run advertises %s; README.md's list of what it advertises leaves it out: %s", name, m[0])
		}
	}
	for _, name := range named {
		if _, ok := families[name]; !ok && !facets[name] && name != "extensions" {
			t.Errorf("README.md says make run advertises %s, which is no family or facet of the advertisement", name)
		}
	}
}
