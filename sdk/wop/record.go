package wop

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The status of a family record: how settled the family's surface is.
const (
	// StatusStable is a family whose surface will not change within the
	// protocol major. A stable record has no until.
	StatusStable = "stable"
	// StatusExperimental is a family that may still change; its until
	// says when the record lapses.
	StatusExperimental = "experimental"
	// StatusDeprecated is a family on its way out; its until says when.
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

// recordStatuses lists the values a family record's status may take in
// OpenWOP's discovery document.
func recordStatuses() []string { return []string{StatusStable, StatusExperimental, StatusDeprecated} }

// recordWitnesses lists OpenWOP's witness classes, the values a family
// record's witness may take.
func recordWitnesses() []string {
	return []string{WitnessUnaided, WitnessGated, WitnessSeamGated, WitnessClaimsCheck, WitnessNegativeExistence}
}

var (
	// protocolVersion is since's shape, and one of until's: "N.N".
	protocolVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
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
	if !slices.Contains(recordStatuses(), status) {
		return fmt.Errorf("status %q: must be one of %s", status, strings.Join(recordStatuses(), ", "))
	}
	if !protocolVersion.MatchString(since) {
		return fmt.Errorf(`since %q: must be a protocol version "N.N", e.g. "2.0"`, since)
	}
	if !slices.Contains(recordWitnesses(), witness) {
		return fmt.Errorf("witness %q: must be one of %s", witness, strings.Join(recordWitnesses(), ", "))
	}
	switch {
	case status == StatusStable && until != "":
		return fmt.Errorf("until %q: a stable family has no until", until)
	case status != StatusStable && until == "":
		return fmt.Errorf("until: required for a family that is %s (a protocol version \"N.N\" or a date YYYY-MM-DD)", status)
	case until != "" && !protocolVersion.MatchString(until) && !isDate(until):
		return fmt.Errorf(`until %q: must be a protocol version "N.N" or a date YYYY-MM-DD`, until)
	}
	return nil
}

// isDate reports whether s is a calendar date, YYYY-MM-DD.
func isDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
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
		CodePackRuntimeRequirementUnmet, CodeSandboxMemoryExceeded, CodeSandboxTimeout,
		CodeSandboxCapabilityDenied, CodeSandboxEscapeAttempt,
	}
}
