package wop

import (
	"strings"
	"testing"
)

func TestCheckFamilyRecord(t *testing.T) {
	for _, tc := range []struct {
		status, since, until, witness string
		wantField                     string // "" when valid
	}{
		{"stable", "2.0", "", "claims-check", ""},
		{"experimental", "2.0", "2027-06-30", "seam-gated", ""},
		{"deprecated", "2.0", "3.0", "witnessable-gated", ""},
		{"", "2.0", "", "claims-check", "status"},
		{"beta", "2.0", "2.1", "claims-check", "status"},
		{"stable", "2", "", "claims-check", "since"},
		{"stable", "", "", "claims-check", "since"},
		{"stable", "2.0", "", "", "witness"},
		{"stable", "2.0", "", "trust-me", "witness"},
		{"stable", "2.0", "2027-01-01", "claims-check", "until"},
		{"experimental", "2.0", "", "claims-check", "until"},
		{"experimental", "2.0", "soon", "claims-check", "until"},
		{"experimental", "2.0", "2027-13-01", "claims-check", "until"},
		{StatusDeprecated, "2.1", "2027-02-28", WitnessNegativeExistence, ""},
	} {
		err := CheckFamilyRecord(tc.status, tc.since, tc.until, tc.witness)
		switch {
		case tc.wantField == "" && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.wantField != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantField)):
			t.Errorf("%+v: %v, want an error naming %s", tc, err, tc.wantField)
		}
	}
}

func TestValidVendorCode(t *testing.T) {
	for code, want := range map[string]bool{
		"acme.key_not_found": true, "wophost.method_not_allowed": true, "my-org.x1": true, "a1.b": true,
		"acme.kv.key_not_found": false, "openwop.thing": false, "not_found": false, "Acme.x": false,
		"acme.Key": false, "acme.": false, ".x": false, "acme-.x": false, "acme.1x": false, "acme.x-y": false,
	} {
		if got := ValidVendorCode(code); got != want {
			t.Errorf("ValidVendorCode(%q) = %v, want %v", code, got, want)
		}
	}
}
