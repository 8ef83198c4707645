package plugintest

import (
	"strings"
	"testing"
)

// pureProblems refuses pure methods on a core family and a pure method a
// family does not list, and accepts a vendor family's listed method.
func TestPureProblems(t *testing.T) {
	d := &Description{Families: []FamilyDescription{
		{Name: "acme.kv", Methods: []string{"get", "put"}, PureMethods: []string{"get"}},
	}}
	if prs := pureProblems(d); len(prs) != 0 {
		t.Fatalf("a listed pure method: %q", prs)
	}
	d.Families = append(d.Families,
		FamilyDescription{Name: "acme.log", Methods: []string{"append"}, PureMethods: []string{"tail"}},
		FamilyDescription{Name: "mcp", Methods: []string{"listTools"}, PureMethods: []string{"listTools"}})
	prs := pureProblems(d)
	if len(prs) != 2 || !strings.Contains(prs[0], `family acme.log declares the pure method "tail"`) ||
		!strings.Contains(prs[1], "family mcp declares pure methods") {
		t.Fatalf("problems = %q", prs)
	}
}
