package wop

import (
	"strings"
	"testing"
)

func TestCheckRecord(t *testing.T) {
	for _, r := range [][4]string{
		{StatusStable, "2.0", "", WitnessClaimsCheck},
		{StatusExperimental, "2.0", "2027-06-30", WitnessGated},
		{StatusDeprecated, "2.1", "3.0", WitnessNegativeExistence},
	} {
		if err := CheckRecord(r[0], r[1], r[2], r[3]); err != nil {
			t.Errorf("%v: %v", r, err)
		}
	}
	for want, r := range map[string][4]string{
		`status "bogus" is not stable, experimental, deprecated`: {"bogus", "2.0", "", WitnessClaimsCheck},
		`status experimental needs until`:                        {StatusExperimental, "2.0", "", WitnessClaimsCheck},
		`until "2027-06-30" is set on a stable family`:           {StatusStable, "2.0", "2027-06-30", WitnessClaimsCheck},
		`since "1" is not a protocol version`:                    {StatusStable, "1", "", WitnessClaimsCheck},
		`until "soon" is neither`:                                {StatusDeprecated, "2.0", "soon", WitnessClaimsCheck},
		`until "2027-13-01" is neither`:                          {StatusDeprecated, "2.0", "2027-13-01", WitnessClaimsCheck},
		`witness "" is not witnessable-unaided`:                  {StatusStable, "2.0", "", ""},
	} {
		err := CheckRecord(r[0], r[1], r[2], r[3])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want it to contain %q", r, err, want)
		}
	}
}
