package wop

import (
	"fmt"
	"regexp"
	"strings"
)

// RecordStatuses lists the values a family record's status may take in
// OpenWOP's discovery document.
func RecordStatuses() []string { return []string{"stable", "experimental", "deprecated"} }

// RecordWitnesses lists OpenWOP's witness classes, the values a family
// record's witness may take.
func RecordWitnesses() []string {
	return []string{"witnessable-unaided", "witnessable-gated", "seam-gated", "claims-check", "negative-existence"}
}

var (
	// protocolVersion is since's shape, and one of until's: "N.N".
	protocolVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	// isoDate is until's other shape: a calendar date.
	isoDate = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	// vendorCodePattern is OpenWOP's vendor error code: an org, exactly
	// one dot, a snake_case name. Go's regexp has no lookahead: the
	// reserved org openwop is refused apart (ValidVendorCode).
	vendorCodePattern = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$`)
)

// CheckFamilyRecord returns an error naming the field when status, since,
// until and witness do not make a valid OpenWOP family record: status is
// stable, experimental or deprecated; since is "N.N"; witness is one of
// OpenWOP's witness classes; until ("N.N" or a date YYYY-MM-DD) is
// required unless the family is stable, and forbidden when it is.
func CheckFamilyRecord(status, since, until, witness string) error {
	if !contains(RecordStatuses(), status) {
		return fmt.Errorf("status %q: must be one of %s", status, strings.Join(RecordStatuses(), ", "))
	}
	if !protocolVersion.MatchString(since) {
		return fmt.Errorf(`since %q: must be a protocol version "N.N", e.g. "2.0"`, since)
	}
	if !contains(RecordWitnesses(), witness) {
		return fmt.Errorf("witness %q: must be one of %s", witness, strings.Join(RecordWitnesses(), ", "))
	}
	switch {
	case status == "stable" && until != "":
		return fmt.Errorf("until %q: a stable family has no until", until)
	case status != "stable" && until == "":
		return fmt.Errorf("until: required for a %s family (a protocol version \"N.N\" or a date YYYY-MM-DD)", status)
	case until != "" && !protocolVersion.MatchString(until) && !isoDate.MatchString(until):
		return fmt.Errorf(`until %q: must be a protocol version "N.N" or a date YYYY-MM-DD`, until)
	}
	return nil
}

// ValidVendorCode reports whether code is a vendor error code by
// OpenWOP's grammar: "org.name", exactly one dot, the org lowercase
// letters and digits in dash-separated words and not openwop, the name
// snake_case ("acme.key_not_found").
func ValidVendorCode(code string) bool {
	return vendorCodePattern.MatchString(code) && !strings.HasPrefix(code, "openwop.")
}

// CoreCodes lists the codes of the contract's error envelope this package
// defines (the Code constants): any plugin may return them.
func CoreCodes() []string {
	return []string{
		CodeCapabilityNotProvided, CodeHostCapabilityMissing, CodePackPeerDependencyMissing,
		CodeCapabilityNotDeclared, CodePackValidationFailed, CodeValidation, CodeNotFound,
		CodeIdempotencyKeyMismatch, CodeUnavailable, CodeDeadlineExceeded, CodeCancelled,
		CodeCallDepthExceeded, CodeInternal, CodeMCPError, CodeUpstreamUnavailable,
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
