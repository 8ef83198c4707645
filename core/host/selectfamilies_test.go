package host

import (
	"strings"
	"testing"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/loader"
)

// A plugin describing a family record OpenWOP would refuse is refused
// with the field named, before anything is advertised.
func TestSelectFamiliesChecksTheRecord(t *testing.T) {
	cc := &config.Capability{}
	good := loader.FamilyDescription{Name: "acme.kv", Status: "experimental", Since: "2.0", Until: "2027-06-30", Witness: "claims-check"}
	if _, err := selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{good}}); err != nil {
		t.Fatal(err)
	}
	bad := good
	bad.Until = ""
	_, err := selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{bad}})
	if err == nil || !strings.Contains(err.Error(), `family "acme.kv"`) || !strings.Contains(err.Error(), "until") {
		t.Fatalf("experimental without until: %v", err)
	}
	bad = good
	bad.Name = "acme.kv.extra"
	if _, err := selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{bad}}); err == nil || !strings.Contains(err.Error(), "exactly one dot") {
		t.Fatalf("two dots: %v", err)
	}
	bad = good
	bad.Status = "bogus"
	if _, err := selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{bad}}); err == nil ||
		!strings.Contains(err.Error(), `plugin p describes family "acme.kv" with an invalid record: status "bogus": must be one of stable, experimental, deprecated`) {
		t.Fatalf("status bogus: %v", err)
	}
	bad = good
	bad.Witness = ""
	if _, err := selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{bad}}); err == nil || !strings.Contains(err.Error(), "witness") {
		t.Fatalf("no witness: %v", err)
	}
}

// A Describe whose pure_methods names a method the family does not list,
// or declares any on a core family, is refused naming the family and the
// method: a replay would run that method live on the plugin's word.
func TestSelectFamiliesChecksPureMethods(t *testing.T) {
	cc := &config.Capability{}
	kv := loader.FamilyDescription{Name: "acme.kv", Status: "stable", Since: "2.0", Witness: "claims-check",
		Methods: []string{"get", "put"}, PureMethods: []string{"get"}}
	got, err := selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{kv}})
	if err != nil || len(got) != 1 || len(got[0].PureMethods) != 1 {
		t.Fatalf("a served pure method: %v, %+v", err, got)
	}
	bad := kv
	bad.PureMethods = []string{"get", "scan"}
	_, err = selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{bad}})
	if err == nil || !strings.Contains(err.Error(), `family "acme.kv"`) || !strings.Contains(err.Error(), `pure method "scan", which is not one of its methods`) {
		t.Fatalf("an unserved pure method: %v", err)
	}
	core := loader.FamilyDescription{Name: "mcp", Status: "stable", Since: "2.0", Witness: "seam-gated",
		Methods: []string{"callTool", "listTools"}, PureMethods: []string{"callTool"}}
	_, err = selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{core}})
	if err == nil || !strings.Contains(err.Error(), `family "mcp"`) || !strings.Contains(err.Error(), `pure method "callTool": the contract fixes`) {
		t.Fatalf("pure methods on a core family: %v", err)
	}
}
