package promptlibrary

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The pin grammar (docs/contract.md §4.2), shared by the host, which rewrites bare
// names through a pack's lock map, and by prompt store plugins:
//
//	ref     = name "@" pin
//	pin     = version [ "#" digest ] / digest
//	version = numeric *( "." numeric ) [ "-" pre ] [ "+" build ]   ; 3, 1.2.0, 2.0.0-rc.1
//	digest  = "sha256:" 64 lowercase hex digits
//	name    = segment *( "/" segment )
//	segment = [a-z0-9] *( [a-z0-9._-] )                             ; at most 64 bytes
//
// A version starts with a digit, so no label ("latest", "production")
// can pass for one.
const (
	// DigestPrefix starts every digest.
	DigestPrefix = "sha256:"
	// MaxNameBytes bounds a prompt name.
	MaxNameBytes = 200
	// MaxVersionBytes bounds a version.
	MaxVersionBytes = 64
)

// The patterns bound lengths apart: a counted repetition such as {0,63}
// compiles to one state per count, at the package's init in every process
// that links it.
var (
	segmentPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	versionPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	digestPattern  = regexp.MustCompile(`^sha256:[0-9a-f]+$`)
)

// maxSegmentBytes bounds one /-separated segment of a prompt name.
const maxSegmentBytes = 64

// ErrUnpinned is wrapped by ParsePin's error when the reference does not
// pin a prompt: a bare name, an empty pin, or a moving label such as
// "latest" where a version belongs. Callers answer it with prompt_unpinned.
var ErrUnpinned = errors.New("prompt reference is not pinned")

// Pin is a parsed prompt reference. Name is always set, and at least one
// of Version and Digest.
type Pin struct {
	Name    string
	Version string
	// Digest is "sha256:<hex>", or "" when the pin names a version only.
	Digest string
}

// String formats p in the pin grammar.
func (p Pin) String() string {
	switch {
	case p.Version != "" && p.Digest != "":
		return p.Name + "@" + p.Version + "#" + p.Digest
	case p.Digest != "":
		return p.Name + "@" + p.Digest
	default:
		return p.Name + "@" + p.Version
	}
}

// ParsePin parses a pinned reference. A bare name, a label, "latest", a
// range or anything else outside the grammar is an error; the caller
// reports it as prompt_unpinned. IsBareName tells a bare name apart, for
// the lock-map lookup.
func ParsePin(ref string) (Pin, error) {
	at := strings.IndexByte(ref, '@')
	if at < 0 {
		if CheckName(ref) == nil {
			return Pin{}, fmt.Errorf("%q is a bare prompt name (%w); pin it as name@<version>, name@sha256:<hex> or name@<version>#sha256:<hex>, or lock it in the pack's prompt lock map (x-wophost-prompts)", ref, ErrUnpinned)
		}
		return Pin{}, fmt.Errorf("%q is not a pinned prompt reference (name@<version>, name@sha256:<hex> or name@<version>#sha256:<hex>)", ref)
	}
	name, rest := ref[:at], ref[at+1:]
	if err := CheckName(name); err != nil {
		return Pin{}, fmt.Errorf("prompt reference %q: %w", ref, err)
	}
	p := Pin{Name: name}
	switch {
	case strings.HasPrefix(rest, DigestPrefix):
		p.Digest = rest
	default:
		if i := strings.IndexByte(rest, '#'); i >= 0 {
			p.Version, p.Digest = rest[:i], rest[i+1:]
			if p.Digest == "" {
				return Pin{}, fmt.Errorf("prompt reference %q: the digest after '#' is empty", ref)
			}
		} else {
			p.Version = rest
		}
		if err := CheckVersion(p.Version); err != nil {
			// A label or an empty version names no fixed prompt.
			return Pin{}, fmt.Errorf("prompt reference %q: %w: %w", ref, ErrUnpinned, err)
		}
	}
	if p.Digest != "" {
		if err := CheckDigest(p.Digest); err != nil {
			return Pin{}, fmt.Errorf("prompt reference %q: %w", ref, err)
		}
	}
	return p, nil
}

// IsBareName reports whether ref is a well-formed prompt name without a
// pin: the only form a pack's lock map may resolve.
func IsBareName(ref string) bool {
	return !strings.Contains(ref, "@") && CheckName(ref) == nil
}

// CheckName reports why name is not a valid prompt name, or nil. Names are
// lowercase segments joined by "/"; "." and ".." segments, absolute paths
// and backslashes cannot pass, so a name is always a safe relative path.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("prompt name is empty")
	}
	if len(name) > MaxNameBytes {
		return fmt.Errorf("prompt name is longer than %d bytes", MaxNameBytes)
	}
	for _, seg := range strings.Split(name, "/") {
		if len(seg) > maxSegmentBytes || !segmentPattern.MatchString(seg) || strings.Trim(seg, ".") == "" {
			return fmt.Errorf("prompt name %q: each /-separated segment must start with a lowercase letter or digit and hold only a-z, 0-9, '.', '_' and '-' (at most 64 bytes)", name)
		}
	}
	return nil
}

// CheckVersion reports why v is not a valid prompt version, or nil.
// Versions are integers ("3") or dotted numbers with an optional semver
// pre-release and build ("1.2.0-rc.1"); labels such as "latest" are not
// versions.
func CheckVersion(v string) error {
	if v == "" {
		return fmt.Errorf("prompt version is empty")
	}
	if len(v) > MaxVersionBytes {
		return fmt.Errorf("prompt version is longer than %d bytes", MaxVersionBytes)
	}
	if !versionPattern.MatchString(v) {
		return fmt.Errorf("prompt version %q is not a version (an integer such as 3 or a dotted version such as 1.2.0); labels such as \"latest\" are not accepted", v)
	}
	return nil
}

// CheckDigest reports why d is not "sha256:" followed by 64 lowercase hex
// digits, or nil.
func CheckDigest(d string) error {
	if len(d) != len(DigestPrefix)+sha256.Size*2 || !digestPattern.MatchString(d) {
		return fmt.Errorf("digest %q is not sha256:<64 lowercase hex digits>", d)
	}
	return nil
}

// DigestOf returns the digest of raw in the form Prompt.Digest carries.
func DigestOf(raw []byte) string {
	sum := sha256.Sum256(raw)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// CheckAnswer reports why p is not a faithful answer to a get of pin, or
// nil: Raw must hash to Digest, and the name, version and digest must be
// the ones pinned. The host runs it on every answer before the node sees
// it; a failure is an integrity alarm (prompt_digest_mismatch), never a
// reason to fetch something else.
func CheckAnswer(p *Prompt, pin Pin) error {
	if got := DigestOf([]byte(p.Raw)); got != p.Digest {
		return fmt.Errorf("prompt %s: raw hashes to %s, the answer claims %s", pin, got, p.Digest)
	}
	if p.Name != pin.Name {
		return fmt.Errorf("prompt %s: the answer is for prompt %q", pin, p.Name)
	}
	if pin.Version != "" && p.Version != pin.Version {
		return fmt.Errorf("prompt %s: the answer is version %q", pin, p.Version)
	}
	if pin.Digest != "" && p.Digest != pin.Digest {
		return fmt.Errorf("prompt %s: the stored version has digest %s", pin, p.Digest)
	}
	return nil
}
