package pgstore

import (
	"strings"
	"testing"
)

func TestIsSchemaName(t *testing.T) {
	for name, want := range map[string]bool{
		"wophost_items":         true,
		"_x":                    true,
		"a1":                    true,
		strings.Repeat("a", 63): true,
		strings.Repeat("a", 64): false,
		"":                      false,
		"1x":                    false,
		"X":                     false,
		"a-b":                   false,
		`x"; DROP`:              false,
		"sch\u00e9ma":           false,
	} {
		if got := isSchemaName(name); got != want {
			t.Errorf("isSchemaName(%q) = %v, want %v", name, got, want)
		}
	}
}
