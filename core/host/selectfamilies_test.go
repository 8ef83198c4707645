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
	bad.Witness = ""
	if _, err := selectFamilies(cc, &loader.Description{Name: "p", Families: []loader.FamilyDescription{bad}}); err == nil || !strings.Contains(err.Error(), "witness") {
		t.Fatalf("no witness: %v", err)
	}
}
