// Package strictjson is the one reading of JSON wherever the host or the
// SDK decides on a document: a call's payload when the host admits it, a
// plugin's request and config, a pack node's input. Every reader sees
// the same members, so no two parsers can disagree about one request.
//
// The reading is JSON v2's (github.com/go-json-experiment/json): member
// names match exactly, case included, after their escapes are undone
// ("\u0061sync" is "async"); a name that appears twice in one object is
// refused, as is invalid UTF-8, an unknown member and anything after the
// first JSON value. Every refusal is a validation_error naming the member.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/wophost/wophost/sdk/wop"
)

// strict are the reading's rules beyond JSON v2's defaults, which
// already refuse duplicate names and invalid UTF-8 and match names
// exactly. It is never changed: options are immutable values.
var strict = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
)

// newDecoder reads data in place: a bytes.Buffer is parsed without a
// copy, and reading it changes nothing of data.
func newDecoder(data []byte) *jsontext.Decoder {
	return jsontext.NewDecoder(bytes.NewBuffer(data), strict)
}

// Decode unmarshals data into v. Empty data is JSON null: an absent
// payload leaves v as it is. what names the document in the error
// ("request", "input", "config").
func Decode(data []byte, v any, what string) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := newDecoder(data)
	if err := json.UnmarshalDecode(dec, v, strict); err != nil {
		return wop.Errorf(wop.CodeValidation, "invalid %s: %s", what, describe(err))
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return wop.Errorf(wop.CodeValidation, "invalid %s: data after the JSON value", what)
	}
	return nil
}

// Check reports whether data is one JSON value that the reading accepts,
// whatever its members: no duplicate name in any object, valid UTF-8,
// nothing after the value.
func Check(data []byte, what string) error {
	dec := newDecoder(data)
	if _, err := dec.ReadValue(); err != nil {
		return wop.Errorf(wop.CodeValidation, "invalid %s: %s", what, describe(err))
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return wop.Errorf(wop.CodeValidation, "invalid %s: data after the JSON value", what)
	}
	return nil
}

// Flag reads the top-level boolean member name of the JSON object data
// as Members does: true only when it is present and true; a value that
// is not a boolean or null is refused.
func Flag(data []byte, name, what string) (bool, error) {
	var v jsontext.Value
	if err := scan(data, what, []string{name}, func(_ int, val jsontext.Value) { v = val }); err != nil {
		return false, err
	}
	switch v.Kind() {
	case 0, 'f', 'n':
		return false, nil
	case 't':
		return true, nil
	default:
		return false, wop.Errorf(wop.CodeValidation, "invalid %s: member %q: expected a boolean, got JSON %s", what, name, kindName(v.Kind()))
	}
}

// Members reads the JSON object data for a decision on some of its
// top-level members and returns the values of those named that are
// present, compact. It refuses what any two readers could take
// differently: a duplicate name anywhere, invalid UTF-8, data after the
// object, and a member whose name differs from a named one only in case
// (a reader that folds case, as Go's encoding/json does, would take it
// for the named one). Other members are left to the reader of the whole
// request. Empty data and null read as Decode reads them, an object
// without members; any other data that is not an object is refused: the
// decision cannot be made on it.
func Members(data []byte, what string, names ...string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := scan(data, what, names, func(i int, val jsontext.Value) {
		v := jsontext.Value(bytes.Clone(val))
		_ = v.Compact() // valid: the decoder read it
		out[names[i]] = v
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scan reads data as Members describes and calls found with the index
// in names and the value of each named member present. A value is valid
// only during the call.
func scan(data []byte, what string, names []string, found func(int, jsontext.Value)) error {
	if t := bytes.TrimSpace(data); len(t) == 0 || string(t) == "null" {
		return nil
	}
	fail := func(err error) error {
		return wop.Errorf(wop.CodeValidation, "invalid %s: %s", what, describe(err))
	}
	dec := newDecoder(data)
	tok, err := dec.ReadToken()
	if err != nil {
		return fail(err)
	}
	if tok.Kind() != '{' {
		return wop.Errorf(wop.CodeValidation, "invalid %s: a JSON object is expected, got JSON %s", what, kindName(tok.Kind()))
	}
	var buf [64]byte
	for dec.PeekKind() != '}' {
		quoted, err := dec.ReadValue()
		if err != nil {
			return fail(err)
		}
		// Unquoted without an allocation for any name that fits buf.
		member, err := jsontext.AppendUnquote(buf[:0], quoted)
		if err != nil {
			return fail(err)
		}
		i := -1
		for k, name := range names {
			switch {
			case string(member) == name:
				i = k
			case strings.EqualFold(string(member), name):
				return wop.Errorf(wop.CodeValidation, "invalid %s: unknown member %q; the member is spelled %q", what, member, name)
			}
		}
		val, err := dec.ReadValue()
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			found(i, val)
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return fail(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return wop.Errorf(wop.CodeValidation, "invalid %s: data after the JSON value", what)
	}
	return nil
}

// describe explains a reading error with the member it concerns.
func describe(err error) string {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &sem):
		at := where(sem.JSONPointer)
		switch {
		case errors.Is(sem.Err, json.ErrUnknownName):
			return fmt.Sprintf("unknown member %q%s", sem.JSONPointer.LastToken(), at)
		case sem.GoType != nil && sem.JSONKind != 0:
			return fmt.Sprintf("member %q: expected %s, got JSON %s%s", memberName(sem.JSONPointer), sem.GoType, kindName(sem.JSONKind), at)
		case sem.Err != nil:
			return fmt.Sprintf("member %q: %v%s", memberName(sem.JSONPointer), sem.Err, at)
		}
	case errors.As(err, &syn):
		at := where(syn.JSONPointer)
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			return fmt.Sprintf("member %q appears twice%s", syn.JSONPointer.LastToken(), at)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Sprintf("unexpected end of the JSON value at byte %d", syn.ByteOffset)
		case syn.Err != nil:
			return fmt.Sprintf("malformed JSON at byte %d: %v%s", syn.ByteOffset, syn.Err, at)
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of the JSON value"
	}
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "json: "), "jsontext: ")
}

// memberName is the member p ends at, "(root)" for the whole document.
func memberName(p jsontext.Pointer) string {
	if p == "" {
		return "(root)"
	}
	return p.LastToken()
}

// where is " (at POINTER)" for a member below the top level, where the
// name alone does not say which one it is.
func where(p jsontext.Pointer) string {
	if strings.Count(string(p), "/") < 2 {
		return ""
	}
	return " (at " + string(p) + ")"
}

// kindName names a JSON kind as the messages spell it.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}
