package mcp

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

// validRecord is the mcp record the repository's plugin publishes
// (plugins/mcp's facets under its default config).
const validRecord = `{"client":true,"revisions":["2026-07-28","2025-11-25"],"preferredVersion":"2026-07-28",
	"minimumRevision":"2025-11-25","refreshedAt":"2026-11-29","mrtr":{"maxRounds":8}}`

// parse reads a record's facets as the host reads them from Configure.
func parse(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return f
}

// with returns the valid record with key set to value, or removed when
// value is "".
func with(t *testing.T, key, value string) map[string]json.RawMessage {
	t.Helper()
	f := maps.Clone(parse(t, validRecord))
	if value == "" {
		delete(f, key)
	} else {
		f[key] = json.RawMessage(value)
	}
	return f
}

// The mcp record passes with its required facets and every optional one
// the schema lists, and each near miss is refused naming the facet: a
// required facet missing, one at a time, a value of the wrong type or out
// of range, and a key the closed record does not have.
func TestCheckFacets(t *testing.T) {
	if err := CheckFacets(parse(t, validRecord)); err != nil {
		t.Fatalf("the plugin's record refused: %v", err)
	}
	for key, value := range map[string]string{
		FacetClient:   "",
		"mrtr":        `{}`,
		"refreshedAt": `"2026-11-29T08:30:00Z"`,
		"revisions":   `["2026-07-28"]`,
		"profiles":    `["streamable-http",{"name":"x"}]`,
		"features":    `null`,
		"serverUrls":  `["https://mcp.example.com/mcp"]`,
		"serverMount": `"/mcp"`,
	} {
		if err := CheckFacets(with(t, key, value)); err != nil {
			t.Errorf("%s = %s refused: %v", key, value, err)
		}
	}
	for _, n := range []string{"1", "16", "8.0"} {
		if err := CheckFacets(with(t, "mrtr", `{"maxRounds":`+n+`,"other":"open"}`)); err != nil {
			t.Errorf("maxRounds %s refused: %v", n, err)
		}
	}

	for _, tc := range []struct{ key, value, want string }{
		{"revisions", "", `facet "revisions": required in the mcp record`},
		{"preferredVersion", "", `facet "preferredVersion": required in the mcp record`},
		{"minimumRevision", "", `facet "minimumRevision": required in the mcp record`},
		{"refreshedAt", "", `facet "refreshedAt": required in the mcp record`},
		{"revisions", `[]`, `facet "revisions": must be a non-empty array of dates YYYY-MM-DD, got an empty array`},
		{"revisions", `"2026-07-28"`, `facet "revisions": must be a non-empty array of dates YYYY-MM-DD, got the string "2026-07-28"`},
		{"revisions", `["2026-07-28","2026-7-28"]`, `facet "revisions": item 1 must be a date YYYY-MM-DD, got the string "2026-7-28"`},
		{"preferredVersion", `"2026-7-28"`, `facet "preferredVersion": must be a date YYYY-MM-DD, got the string "2026-7-28"`},
		{"preferredVersion", `"2026-07-28T00:00:00Z"`, `facet "preferredVersion": must be a date YYYY-MM-DD, got the string "2026-07-28T00:00:00Z"`},
		{"minimumRevision", `20251125`, `facet "minimumRevision": must be a date YYYY-MM-DD, got the number 20251125`},
		{"refreshedAt", `"yesterday"`, `facet "refreshedAt": must be a string starting with a date YYYY-MM-DD, got the string "yesterday"`},
		{"refreshedAt", `"2026-7-28"`, `facet "refreshedAt": must be a string starting with a date YYYY-MM-DD, got the string "2026-7-28"`},
		{"client", `{}`, `facet "client": must be the boolean true (the constant OpenWOP publishes), got an object`},
		{"client", `false`, `facet "client": must be the boolean true (the constant OpenWOP publishes), got false`},
		{"client", `"true"`, `facet "client": must be the boolean true (the constant OpenWOP publishes), got the string "true"`},
		{"mrtr", `{"maxRounds":0}`, `facet "mrtr": maxRounds must be an integer from 1 to 16, got the number 0`},
		{"mrtr", `{"maxRounds":17}`, `facet "mrtr": maxRounds must be an integer from 1 to 16, got the number 17`},
		{"mrtr", `{"maxRounds":8.5}`, `facet "mrtr": maxRounds must be an integer from 1 to 16, got the number 8.5`},
		{"mrtr", `{"maxRounds":"8"}`, `facet "mrtr": maxRounds must be an integer from 1 to 16, got the string "8"`},
		{"mrtr", `{"maxRounds":null}`, `facet "mrtr": maxRounds must be an integer from 1 to 16, got null`},
		{"mrtr", `8`, `facet "mrtr": must be an object, got the number 8`},
		{"profiles", `{}`, `facet "profiles": must be an array, got an object`},
		{"serverUrls", `["https://a.example",1]`, `facet "serverUrls": item 1 must be a string, got the number 1`},
		{"serverUrls", `"https://a.example"`, `facet "serverUrls": must be an array of strings, got the string "https://a.example"`},
		{"serverMount", `["/mcp"]`, `facet "serverMount": must be a string, got an array`},
		{"server", `{}`, `facet "server": the mcp record is closed; its facets are client, features, minimumRevision, mrtr, preferredVersion, profiles, refreshedAt, revisions, serverMount, serverUrls`},
	} {
		err := CheckFacets(with(t, tc.key, tc.value))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s = %q: got %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
	if err := CheckFacets(nil); err == nil || !strings.Contains(err.Error(), `facet "revisions": required`) {
		t.Errorf("no facets: %v", err)
	}
}
