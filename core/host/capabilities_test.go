package host

import (
	"strings"
	"testing"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/loader"
)

// A plugin whose Describe carries a family record a client would reject
// is refused, naming the family and the reason: the host never advertises
// such a record, whatever the plugin's SDK let through.
func TestSelectFamiliesRefusesInvalidRecords(t *testing.T) {
	good := loader.FamilyDescription{Name: "acme.kv", Status: "experimental", Since: "2.0", Until: "2027-06-30", Witness: "claims-check", Methods: []string{"get"}}
	cc := &config.Capability{Name: "kv"}
	if _, err := selectFamilies(cc, &loader.Description{Name: "kv", Families: []loader.FamilyDescription{good}}); err != nil {
		t.Fatal(err)
	}
	for want, spoil := range map[string]func(*loader.FamilyDescription){
		`status "bogus" is not stable`:    func(f *loader.FamilyDescription) { f.Status = "bogus" },
		"status experimental needs until": func(f *loader.FamilyDescription) { f.Until = "" },
		`witness "" is not`:               func(f *loader.FamilyDescription) { f.Witness = "" },
	} {
		f := good
		spoil(&f)
		_, err := selectFamilies(cc, &loader.Description{Name: "kv", Families: []loader.FamilyDescription{f}})
		if err == nil || !strings.Contains(err.Error(), "family acme.kv with an invalid record") || !strings.Contains(err.Error(), want) {
			t.Errorf("selectFamilies = %v, want it to contain %q", err, want)
		}
	}
}
