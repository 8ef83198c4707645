package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// RequestDigest is the identity of a node execution request: its typeId
// and its input as canonical JSON, so that a repeat that only reorders
// keys, spaces the JSON differently or spells a number another way
// (1.0, 1, 10e-1) is the same request. The run's timeout, traceparent and
// transport are not part of it: they say how to run, not what to run.
// Input that is not valid UTF-8 JSON is digested as its exact bytes,
// so two inputs a decoder would make equal can never share a digest.
func RequestDigest(typeID string, input []byte) string {
	h := sha256.New()
	h.Write([]byte("wophost node execute v1\x00"))
	h.Write([]byte(typeID))
	h.Write([]byte{0})
	if c, err := Canonical(input); err == nil {
		h.Write([]byte{'c'})
		h.Write(c)
	} else {
		h.Write([]byte{'r'})
		h.Write(input)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ReplayDigest is the identity of a replay request: the run replayed and
// the calls it runs live, in any order and repeated or not. It never
// equals a RequestDigest, so a key used for an execution is a mismatch
// on a replay, and the reverse.
func ReplayDigest(sourceRunID string, live []string) string {
	specs := slices.Clone(live)
	slices.Sort(specs)
	specs = slices.Compact(specs)
	h := sha256.New()
	h.Write([]byte("wophost run replay v1\x00"))
	// Each part is length-prefixed, so no two lists of parts write the
	// same bytes.
	for _, part := range append([]string{sourceRunID}, specs...) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(part))))
		h.Write([]byte(part))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Canonical returns data as canonical JSON: object members sorted by the
// UTF-16 code units of their names (as RFC 8785 sorts them), no
// insignificant whitespace, strings in one escape form, and every number
// as its exact decimal value in the form [-]DIGITSeEXP with no leading or
// trailing zeros. Numbers are compared exactly, never through float64,
// so 12345678901234567890 and 12345678901234567891 stay different. A
// repeated member name keeps its last value, as encoding/json does.
// data must be one valid UTF-8 JSON value.
func Canonical(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("canonical JSON: input is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("canonical JSON: more than one JSON value")
	}
	var b bytes.Buffer
	if err := writeCanonical(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		n, err := canonicalNumber(string(x))
		if err != nil {
			return err
		}
		b.WriteString(n)
	case string:
		writeString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}

// writeString writes s with the escapes RFC 8785 uses: \" \\ \b \f \n \r
// \t, \u00XX for other control characters, everything else as itself.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// compareUTF16 orders strings by their UTF-16 code units.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// canonicalNumber rewrites a JSON number literal as its exact decimal
// value: [-]D…DeE with no leading or trailing zeros in the digits, and
// "0" for every spelling of zero (including -0).
func canonicalNumber(lit string) (string, error) {
	s := lit
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", fmt.Errorf("canonical JSON: %q is not a number", lit)
	}
	exp := new(big.Int)
	if hasExp {
		if _, ok := exp.SetString(strings.TrimPrefix(expPart, "+"), 10); !ok {
			return "", fmt.Errorf("canonical JSON: %q is not a number", lit)
		}
	}
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp.Add(exp, big.NewInt(int64(len(digits)-len(trimmed))))
	out := trimmed + "e" + exp.String()
	if neg {
		out = "-" + out
	}
	return out, nil
}
