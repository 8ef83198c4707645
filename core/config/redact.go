package config

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
)

// Redacted replaces sensitive values in redacted config.
const Redacted = "(sensitive)"

// Redact returns value with every value at one of paths replaced by the
// string "(sensitive)". A "*" path element matches any object key or array
// index. Null values are kept, since they reveal only that nothing was set.
// Input that is not valid JSON comes back as "(sensitive)" as a whole: the
// result is meant for logs, where failing open would leak secrets.
func Redact(value json.RawMessage, paths [][]string) json.RawMessage {
	if len(paths) == 0 {
		return value
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	// Numbers stay json.Number so they are written back digit for digit.
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return redactedWhole()
	}
	if _, err := dec.Token(); err != io.EOF {
		return redactedWhole()
	}

	for _, p := range paths {
		v = redactAt(v, p)
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Config values are not HTML; escaping would only garble URLs in logs.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return redactedWhole()
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func redactedWhole() json.RawMessage {
	return json.RawMessage(strconv.Quote(Redacted))
}

// redactAt replaces the values at path inside v with "(sensitive)",
// leaving nulls, and returns the (possibly replaced) v.
func redactAt(v any, path []string) any {
	return replaceAt(v, path, func(e any) any {
		if e == nil {
			return nil
		}
		return Redacted
	})
}

// replaceAt replaces each value at path inside v with what fn returns for
// it, in place where v is an object or array, and returns the (possibly
// replaced) v. A "*" element matches any object key or array index.
func replaceAt(v any, path []string, fn func(any) any) any {
	if len(path) == 0 {
		return fn(v)
	}
	key, rest := path[0], path[1:]
	switch t := v.(type) {
	case map[string]any:
		if key == "*" {
			for k, e := range t {
				t[k] = replaceAt(e, rest, fn)
			}
		} else if e, ok := t[key]; ok {
			t[key] = replaceAt(e, rest, fn)
		}
	case []any:
		if key == "*" {
			for i, e := range t {
				t[i] = replaceAt(e, rest, fn)
			}
		} else if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(t) {
			t[i] = replaceAt(t[i], rest, fn)
		}
	}
	return v
}

// SensitiveValues returns the values at paths inside value, as Redact
// finds them: each string, and each other scalar as its JSON text. Nested
// objects and arrays at a path give their scalars. Invalid JSON gives
// none.
func SensitiveValues(value json.RawMessage, paths [][]string) []string {
	if len(paths) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	var out []string
	collect := func(e any) any {
		out = collectScalars(e, out)
		return e
	}
	for _, p := range paths {
		replaceAt(v, p, collect)
	}
	return out
}

func collectScalars(v any, out []string) []string {
	switch t := v.(type) {
	case nil:
	case string:
		out = append(out, t)
	case json.Number:
		out = append(out, t.String())
	case bool:
		out = append(out, strconv.FormatBool(t))
	case map[string]any:
		for _, e := range t {
			out = collectScalars(e, out)
		}
	case []any:
		for _, e := range t {
			out = collectScalars(e, out)
		}
	}
	return out
}
