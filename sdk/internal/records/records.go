// Package records checks the facets of a core family's record against
// OpenWOP's discovery schema (its capabilities.schema.json, restated in
// core/registry/testdata/openwop-discovery.schema.json). The family
// packages export each check (aienvelope.CheckFacets, mcp.CheckFacets,
// ...); the plugin SDK's Configure and the conformance kit apply them by
// family name through Check.
package records

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// Check returns an error naming the facet when facets would not make a
// valid record of family, a core family; nil for a vendor family, whose
// record under extensions is open.
func Check(family string, facets map[string]json.RawMessage) error {
	switch family {
	case wop.FamilyAIEnvelope:
		return AIEnvelope(facets)
	case wop.FamilyPromptLibrary:
		return PromptLibrary(facets)
	case wop.FamilyAgentRuntime:
		return AgentRuntime(facets)
	case wop.FamilyAgents:
		return Agents(facets)
	case wop.FamilyMCP:
		return MCP(facets)
	}
	return nil
}

// AIEnvelope checks an aiEnvelope record's facets: await only, the
// boolean true.
func AIEnvelope(facets map[string]json.RawMessage) error {
	return check(wop.FamilyAIEnvelope, facets, nil, map[string]rule{
		"await": isTrue("leave the facet out when await is not served"),
	})
}

// PromptLibrary checks a promptLibrary record's facets: it has none.
func PromptLibrary(facets map[string]json.RawMessage) error {
	return check(wop.FamilyPromptLibrary, facets, nil, nil)
}

// AgentRuntime checks an agentRuntime record's facets: it has none.
func AgentRuntime(facets map[string]json.RawMessage) error {
	return check(wop.FamilyAgentRuntime, facets, nil, nil)
}

// Agents checks an agents record's facets: manifestRuntime only, an
// object.
func Agents(facets map[string]json.RawMessage) error {
	return check(wop.FamilyAgents, facets, nil, map[string]rule{
		"manifestRuntime": isObject,
	})
}

// MCP checks an mcp record's facets: revisions, preferredVersion,
// minimumRevision and refreshedAt required; client the constant true;
// mrtr.maxRounds an integer from 1 to 16; profiles an array, serverUrls
// an array of strings, serverMount a string, features anything.
func MCP(facets map[string]json.RawMessage) error {
	return check(wop.FamilyMCP, facets, []string{"revisions", "preferredVersion", "minimumRevision", "refreshedAt"}, map[string]rule{
		"revisions":        isDates,
		"preferredVersion": isDate,
		"minimumRevision":  isDate,
		"refreshedAt":      startsWithDate,
		"client":           isTrue("the constant OpenWOP publishes"),
		"mrtr":             isMRTR,
		"profiles":         isArray,
		"serverUrls":       isStrings,
		"serverMount":      isString,
		"features":         func(any) error { return nil },
	})
}

// rule checks one facet's value, decoded with json.Number for numbers.
type rule func(v any) error

// check refuses a required facet that is missing, a facet rules does not
// name (the record is closed), and a value its rule refuses, in that
// order, facets in sorted order.
func check(family string, facets map[string]json.RawMessage, required []string, rules map[string]rule) error {
	for _, k := range required {
		if _, ok := facets[k]; !ok {
			return fmt.Errorf("facet %q: required in the %s record", k, family)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(facets)) {
		r, ok := rules[k]
		if !ok {
			if len(rules) == 0 {
				return fmt.Errorf("facet %q: the %s record is closed and has no facets", k, family)
			}
			return fmt.Errorf("facet %q: the %s record is closed; its facets are %s", k, family, strings.Join(slices.Sorted(maps.Keys(rules)), ", "))
		}
		v, err := decode(facets[k])
		if err != nil {
			return fmt.Errorf("facet %q: %w", k, err)
		}
		if err := r(v); err != nil {
			return fmt.Errorf("facet %q: %w", k, err)
		}
	}
	return nil
}

// decode reads one JSON value, numbers as json.Number. An empty value is
// refused: the facet's presence would advertise it with no value.
func decode(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not JSON: data after the value")
	}
	return v, nil
}

// got names a decoded JSON value for an error: its kind, and the value
// of a scalar.
func got(v any) string {
	switch v := v.(type) {
	case nil:
		return "got null"
	case bool:
		return "got " + strconv.FormatBool(v)
	case json.Number:
		return "got the number " + v.String()
	case string:
		return fmt.Sprintf("got the string %q", v)
	case []any:
		return "got an array"
	default:
		return "got an object"
	}
}

// isTrue is the rule of a facet that is the boolean true; why says what
// to do instead.
func isTrue(why string) rule {
	return func(v any) error {
		if b, ok := v.(bool); ok && b {
			return nil
		}
		return fmt.Errorf("must be the boolean true (%s), %s", why, got(v))
	}
}

func isObject(v any) error {
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("must be an object, %s", got(v))
	}
	return nil
}

func isArray(v any) error {
	if _, ok := v.([]any); !ok {
		return fmt.Errorf("must be an array, %s", got(v))
	}
	return nil
}

func isString(v any) error {
	if _, ok := v.(string); !ok {
		return fmt.Errorf("must be a string, %s", got(v))
	}
	return nil
}

func isStrings(v any) error {
	items, ok := v.([]any)
	if !ok {
		return fmt.Errorf("must be an array of strings, %s", got(v))
	}
	for i, item := range items {
		if _, ok := item.(string); !ok {
			return fmt.Errorf("item %d must be a string, %s", i, got(item))
		}
	}
	return nil
}

// isDate is the rule of a date, YYYY-MM-DD.
func isDate(v any) error {
	if s, ok := v.(string); ok && validDate(s) {
		return nil
	}
	return fmt.Errorf("must be a date YYYY-MM-DD, %s", got(v))
}

// isDates is the rule of a non-empty array of dates.
func isDates(v any) error {
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		if ok {
			return fmt.Errorf("must be a non-empty array of dates YYYY-MM-DD, got an empty array")
		}
		return fmt.Errorf("must be a non-empty array of dates YYYY-MM-DD, %s", got(v))
	}
	for i, item := range items {
		if err := isDate(item); err != nil {
			return fmt.Errorf("item %d %w", i, err)
		}
	}
	return nil
}

// startsWithDate is the rule of a string that starts with a date
// YYYY-MM-DD (a date or a timestamp).
func startsWithDate(v any) error {
	if s, ok := v.(string); ok && len(s) >= len(time.DateOnly) && validDate(s[:len(time.DateOnly)]) {
		return nil
	}
	return fmt.Errorf("must be a string starting with a date YYYY-MM-DD, %s", got(v))
}

// isMRTR is the rule of mrtr: an object whose maxRounds, when present,
// is an integer from 1 to 16.
func isMRTR(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("must be an object, %s", got(v))
	}
	raw, ok := m["maxRounds"]
	if !ok {
		return nil
	}
	n, ok := raw.(json.Number)
	if ok {
		f, err := strconv.ParseFloat(n.String(), 64)
		if err == nil && f == math.Trunc(f) && f >= 1 && f <= 16 {
			return nil
		}
	}
	return fmt.Errorf("maxRounds must be an integer from 1 to 16, %s", got(raw))
}

// validDate reports whether s is a calendar date, YYYY-MM-DD.
func validDate(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}
