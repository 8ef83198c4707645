// Package strictjson is the one JSON decoder of the SDK's servers: a
// plugin's request payloads and config and a pack node's input are read
// by the same rules, with the same errors.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wophost/wophost/sdk/wop"
)

// Decode unmarshals data into v, refusing unknown fields and anything after
// the first JSON value. Empty data is JSON null: an absent payload leaves v
// as it is. what names the document in the error ("request", "input"), a
// validation_error that names the field.
func Decode(data []byte, v any, what string) error {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("null")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return wop.Errorf(wop.CodeValidation, "invalid %s: %s", what, describe(err))
	}
	if dec.More() {
		return wop.Errorf(wop.CodeValidation, "invalid %s: data after the JSON value", what)
	}
	return nil
}

// describe explains a decoding error with the field it concerns.
func describe(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(root)"
		}
		return fmt.Sprintf("field %q: expected %s, got JSON %s", field, te.Type, te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
