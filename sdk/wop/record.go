package wop

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The status of a family record: how settled the family's surface is.
const (
	// StatusStable is a family whose surface will not change within the
	// protocol major. A stable record has no Until.
	StatusStable = "stable"
	// StatusExperimental is a family that may still change; its Until says
	// when the record lapses.
	StatusExperimental = "experimental"
	// StatusDeprecated is a family on its way out; its Until says when.
	StatusDeprecated = "deprecated"
)

// The witness class of a family record: how a client can check that the
// host keeps the family's promises.
const (
	// WitnessUnaided: a client sees the behaviour in the results alone.
	WitnessUnaided = "witnessable-unaided"
	// WitnessGated: a client sees it with help the host exposes for it.
	WitnessGated = "witnessable-gated"
	// WitnessSeamGated: only a test seam inside the host shows it.
	WitnessSeamGated = "seam-gated"
	// WitnessClaimsCheck: the host's claim is checked against its
	// declarations, not observed.
	WitnessClaimsCheck = "claims-check"
	// WitnessNegativeExistence: the promise is that something does not
	// happen, shown by its absence.
	WitnessNegativeExistence = "negative-existence"
)

// Statuses and Witnesses list the valid values, in the order above.
func Statuses() []string { return []string{StatusStable, StatusExperimental, StatusDeprecated} }

// Witnesses lists the valid witness classes.
func Witnesses() []string {
	return []string{WitnessUnaided, WitnessGated, WitnessSeamGated, WitnessClaimsCheck, WitnessNegativeExistence}
}

// protocolVersionPattern is a protocol version as a record's Since and
// Until write it: major.minor.
var protocolVersionPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// CheckRecord reports every reason the lifecycle fields of a family record
// are not ones a client accepts, or nil: Status is one of Statuses; Since
// is a protocol version ("2.0"); Until is required unless the family is
// stable, forbidden when it is, and is a protocol version or a date
// ("2027-06-30"); Witness is one of Witnesses. The SDK's Serve and the
// host, at Describe, both apply it.
func CheckRecord(status, since, until, witness string) error {
	var problems []string
	switch status {
	case StatusStable:
		if until != "" {
			problems = append(problems, fmt.Sprintf("until %q is set on a stable family; only an experimental or deprecated one lapses", until))
		}
	case StatusExperimental, StatusDeprecated:
		if until == "" {
			problems = append(problems, fmt.Sprintf("status %s needs until: the protocol version or date (YYYY-MM-DD) the record lapses", status))
		}
	default:
		problems = append(problems, fmt.Sprintf("status %q is not %s", status, strings.Join(Statuses(), ", ")))
	}
	if !protocolVersionPattern.MatchString(since) {
		problems = append(problems, fmt.Sprintf("since %q is not a protocol version such as \"2.0\"", since))
	}
	if until != "" && !protocolVersionPattern.MatchString(until) {
		if _, err := time.Parse(time.DateOnly, until); err != nil {
			problems = append(problems, fmt.Sprintf("until %q is neither a protocol version such as \"3.0\" nor a date such as \"2027-06-30\"", until))
		}
	}
	valid := false
	for _, w := range Witnesses() {
		valid = valid || witness == w
	}
	if !valid {
		problems = append(problems, fmt.Sprintf("witness %q is not %s", witness, strings.Join(Witnesses(), ", ")))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
