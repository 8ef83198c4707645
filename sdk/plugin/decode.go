package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wophost/wophost/sdk/wop"
)

// decodeStrict unmarshals data into v, refusing unknown fields and trailing
// data, with an error that names the field.
func decodeStrict(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return wop.Errorf(wop.CodeValidation, "invalid %s: %s", what, describeJSONError(err))
	}
	if dec.More() {
		return wop.Errorf(wop.CodeValidation, "invalid %s: data after the JSON value", what)
	}
	return nil
}

// DecodeJSONError explains a JSON decoding error with the field it concerns.
func describeJSONError(err error) string {
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
	return err.Error()
}
