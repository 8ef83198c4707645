// Package canonjson writes JSON text in its canonical form, the JSON
// Canonicalization Scheme of RFC 8785: what the host hashes for an
// invocation key and what a pack signature covers.
package canonjson

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Transform returns the canonical form of the JSON text data, or an
// error when data is not one JSON value or has an object with a duplicate
// member name.
//
// It gives what github.com/gowebpki/jcs's Transform gives for every valid
// JSON text (a fuzz test holds it to that) and shares its number
// formatting (jcs.NumberToJSON), but parses in one pass over bytes: it is
// on the path of every logged host-service call, where jcs.Transform costs
// several times more.
func Transform(data []byte) ([]byte, error) {
	p := canonParser{data: data}
	p.skipSpace()
	out, err := p.value(make([]byte, 0, len(data)), 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i != len(p.data) {
		return nil, fmt.Errorf("offset %d: text after the JSON value", p.i)
	}
	return out, nil
}

// maxCanonDepth bounds nesting, so that a hostile payload cannot exhaust
// the stack.
const maxCanonDepth = 1000

type canonParser struct {
	data []byte
	i    int
}

var errCanonEOF = errors.New("unexpected end of JSON")

func (p *canonParser) skipSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at p.i to out.
func (p *canonParser) value(out []byte, depth int) ([]byte, error) {
	if depth > maxCanonDepth {
		return nil, fmt.Errorf("offset %d: nested deeper than %d", p.i, maxCanonDepth)
	}
	if p.i >= len(p.data) {
		return nil, errCanonEOF
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		return p.array(out, depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendCanonString(out, s), nil
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	default:
		return nil, fmt.Errorf("offset %d: unexpected %q", p.i, c)
	}
}

func (p *canonParser) literal(out []byte, lit string) ([]byte, error) {
	if len(p.data)-p.i < len(lit) || string(p.data[p.i:p.i+len(lit)]) != lit {
		return nil, fmt.Errorf("offset %d: not %s", p.i, lit)
	}
	p.i += len(lit)
	return append(out, lit...), nil
}

// number checks JSON's number grammar and appends the number as
// ECMAScript formats it.
func (p *canonParser) number(out []byte) ([]byte, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.data[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.data) && p.data[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, fmt.Errorf("offset %d: a number without digits", start)
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, fmt.Errorf("offset %d: no digits after the decimal point", start)
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, fmt.Errorf("offset %d: no digits in the exponent", start)
		}
	}
	lit := p.data[start:p.i]
	if isSmallInteger(lit) {
		// An integer of at most 15 digits is exact in a float64, and
		// ECMAScript writes it as its digits: the literal itself, but
		// for the sign of zero.
		if string(lit) == "-0" {
			return append(out, '0'), nil
		}
		return append(out, lit...), nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, fmt.Errorf("offset %d: %w", start, err)
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, fmt.Errorf("offset %d: %w", start, err)
	}
	return append(out, s...), nil
}

// isSmallInteger reports whether a number literal JSON's grammar accepted
// is an integer of at most 15 digits: no fraction, no exponent.
func isSmallInteger(lit []byte) bool {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// str reads the string at p.i and returns its value.
func (p *canonParser) str() (string, error) {
	p.i++ // the opening quote
	start := p.i
	// The common case, a string without escapes, is its own bytes.
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c == '"' {
			s := p.data[start:p.i]
			p.i++
			// Bytes that are not UTF-8 pass through as jcs.Transform
			// passes them: the key of such a request is still stable.
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", fmt.Errorf("offset %d: a control character in a string", p.i)
		}
		p.i++
	}
	buf := append([]byte(nil), p.data[start:p.i]...)
	for {
		if p.i >= len(p.data) {
			return "", errCanonEOF
		}
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", fmt.Errorf("offset %d: a control character in a string", p.i)
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.data) {
			return "", errCanonEOF
		}
		esc := p.data[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			buf = append(buf, esc)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if p.i+1 >= len(p.data) || p.data[p.i] != '\\' || p.data[p.i+1] != 'u' {
					return "", fmt.Errorf("offset %d: a lone surrogate", p.i)
				}
				p.i += 2
				r2, err := p.hex4()
				if err != nil {
					return "", err
				}
				// An invalid pair becomes U+FFFD, as jcs.Transform has it.
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", fmt.Errorf("offset %d: unknown escape \\%c", p.i-2, esc)
		}
	}
}

func (p *canonParser) hex4() (rune, error) {
	if len(p.data)-p.i < 4 {
		return 0, errCanonEOF
	}
	n, err := strconv.ParseUint(string(p.data[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, fmt.Errorf("offset %d: a bad \\u escape", p.i)
	}
	p.i += 4
	return rune(n), nil
}

// appendCanonString appends s as RFC 8785 writes a string: the two
// required escapes, the short escapes of \b \f \n \r \t, \u00xx for the
// other control characters, and every other character as itself.
func appendCanonString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			if c < 0x20 {
				out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				out = append(out, c)
			}
		}
	}
	return append(out, '"')
}

func (p *canonParser) array(out []byte, depth int) ([]byte, error) {
	p.i++
	out = append(out, '[')
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return append(out, ']'), nil
	}
	for {
		p.skipSpace()
		var err error
		if out, err = p.value(out, depth+1); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.data) {
			return nil, errCanonEOF
		}
		switch p.data[p.i] {
		case ',':
			p.i++
			out = append(out, ',')
		case ']':
			p.i++
			return append(out, ']'), nil
		default:
			return nil, fmt.Errorf("offset %d: want , or ] in an array", p.i)
		}
	}
}

// member is one object member: its name and its value's canonical bytes.
type member struct {
	name  string
	value []byte
}

func (p *canonParser) object(out []byte, depth int) ([]byte, error) {
	p.i++
	var members []member
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return append(out, '{', '}'), nil
	}
	for {
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, fmt.Errorf("offset %d: want a member name", p.i)
		}
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, fmt.Errorf("offset %d: want : after a member name", p.i)
		}
		p.i++
		p.skipSpace()
		v, err := p.value(nil, depth+1)
		if err != nil {
			return nil, err
		}
		members = append(members, member{name: name, value: v})
		p.skipSpace()
		if p.i >= len(p.data) {
			return nil, errCanonEOF
		}
		if p.data[p.i] == '}' {
			p.i++
			break
		}
		if p.data[p.i] != ',' {
			return nil, fmt.Errorf("offset %d: want , or } in an object", p.i)
		}
		p.i++
	}
	// RFC 8785 orders members by their names' UTF-16 code units.
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].name == m.name {
				return nil, fmt.Errorf("duplicate member name %q", m.name)
			}
			out = append(out, ',')
		}
		out = appendCanonString(out, m.name)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

// compareUTF16 orders two strings by their UTF-16 code units. Byte order
// is the same up to the first character beyond the Basic Multilingual
// Plane or in U+E000..U+FFFF, so plain comparison serves every other pair.
func compareUTF16(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < 0x80 && b[i] < 0x80 {
				return int(a[i]) - int(b[i])
			}
			// Back to the start of the character the two differ in: the
			// bytes before i are equal, so it starts at the same place.
			for i > 0 && !utf8.RuneStart(a[i]) {
				i--
			}
			return slices.Compare(utf16.Encode([]rune(a[i:])), utf16.Encode([]rune(b[i:])))
		}
	}
	return len(a) - len(b)
}
