package schema

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCheckValue(t *testing.T) {
	rounds := Attribute{Name: "max_rounds", Type: Number, Whole: true, Min: Bound(1), Max: Bound(16)}
	timeout := Attribute{Name: "timeout", Type: String, Duration: true}
	retention := Attribute{Name: "finished", Type: String, Duration: true, MinDuration: "24h", OneOf: []string{"forever"}}
	grace := Attribute{Name: "grace", Type: String, Duration: true, MinDuration: "0s", MaxDuration: "1m"}
	policy := Attribute{Name: "policy", Type: String, OneOf: []string{"decline", "accept"}}
	tests := []struct {
		a    Attribute
		v    any
		want string // "" accepts
	}{
		{rounds, 1.0, ""},
		{rounds, 16.0, ""},
		{rounds, nil, ""},
		{rounds, 1.5, "must be a whole number from 1 to 16, got 1.5"},
		{rounds, 0.0, "must be a whole number from 1 to 16, got 0"},
		{rounds, 17.0, "got 17"},
		{rounds, json.Number("3"), ""},
		{Attribute{Type: Number, Min: Bound(0.5)}, 0.25, "must be a number of at least 0.5, got 0.25"},
		{Attribute{Type: Number, Whole: true}, 2.5, "must be a whole number, got 2.5"},
		{timeout, "30s", ""},
		{timeout, "0s", `must be a duration such as "500ms" or "1m30s" greater than zero, got "0s"`},
		{timeout, "-1s", "greater than zero"},
		{timeout, "soon", `got "soon"`},
		{retention, "forever", ""},
		{retention, "168h", ""},
		{retention, "1h", `of at least 24h, or "forever", got "1h"`},
		{grace, "0s", ""},
		{grace, "2m", "from 0s to 1m"},
		{policy, "accept", ""},
		{policy, "maybe", `must be one of "decline" or "accept", got "maybe"`},
		{Attribute{Type: String}, "anything", ""},
	}
	for _, tt := range tests {
		err := tt.a.CheckValue(tt.v)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s = %v: %v", tt.a.Name, tt.v, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s = %v: error %v, want it to contain %q", tt.a.Name, tt.v, err, tt.want)
		}
	}
}

func TestCheckDeclaration(t *testing.T) {
	good := []Attribute{
		{Type: Number, Whole: true, Min: Bound(1)},
		{Type: String, Duration: true, MinDuration: "0s", MaxDuration: "1h"},
		{Type: String, OneOf: []string{"a", "b"}},
		{Type: ListString},
	}
	for _, a := range good {
		if err := a.CheckDeclaration(); err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
	bad := map[string]Attribute{
		"apply to \"number\"":        {Type: String, Whole: true},
		"apply to \"string\"":        {Type: Number, Duration: true},
		"min 5 is above max 1":       {Type: Number, Min: Bound(5), Max: Bound(1)},
		"need duration = true":       {Type: String, MinDuration: "1s"},
		"is not a duration":          {Type: String, Duration: true, MaxDuration: "soon"},
		"minDuration 1h is above":    {Type: String, Duration: true, MinDuration: "1h", MaxDuration: "1m"},
		"oneOf lists \"a\" twice":    {Type: String, OneOf: []string{"a", "a"}},
		"min and max must be finite": {Type: Number, Max: Bound(math.Inf(1))},
	}
	for want, a := range bad {
		if err := a.CheckDeclaration(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want it to contain %q", a, err, want)
		}
	}
}

func TestCheckConfigWalksNestedBlocks(t *testing.T) {
	b := Block{
		Attributes: []Attribute{{Name: "max_rounds", Type: Number, Whole: true, Min: Bound(1)}},
		Blocks: []NestedBlock{
			{TypeName: "retry", Nesting: NestingSingle, Block: Block{Attributes: []Attribute{{Name: "backoff", Type: String, Duration: true}}}},
			{TypeName: "server", Nesting: NestingMap, Block: Block{Attributes: []Attribute{{Name: "timeout", Type: String, Duration: true}}}},
			{TypeName: "root", Nesting: NestingList, Block: Block{Attributes: []Attribute{{Name: "weight", Type: Number, Max: Bound(1)}}}},
		},
	}
	config := `{"max_rounds": 0, "retry": {"backoff": "x"}, "server": {"b": {"timeout": "1s"}, "a": {"timeout": "0s"}},
		"root": [{"weight": 0.5}, {"weight": 2}], "unknown": 5}`
	got := b.CheckConfig(json.RawMessage(config))
	var paths []string
	for _, v := range got {
		paths = append(paths, strings.Join(v.Path, "."))
	}
	if want := "max_rounds retry.backoff server.a.timeout root.1.weight"; strings.Join(paths, " ") != want {
		t.Errorf("violations at %v, want %s", paths, want)
	}
	if v := b.CheckConfig(json.RawMessage(`{"max_rounds": null, "retry": null}`)); len(v) != 0 {
		t.Errorf("absent values: %v", v)
	}
	bad := Block{Attributes: []Attribute{{Name: "n", Type: String, Whole: true}}, Blocks: []NestedBlock{
		{TypeName: "inner", Nesting: NestingSingle, Block: Block{Attributes: []Attribute{{Name: "d", Type: Number, OneOf: []string{"x"}}}}}}}
	var decl []string
	for _, v := range bad.CheckDeclarations() {
		decl = append(decl, strings.Join(v.Path, "."))
	}
	if strings.Join(decl, " ") != "n inner.d" {
		t.Errorf("CheckDeclarations = %v", decl)
	}
}
