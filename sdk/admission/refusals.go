package admission

import (
	"slices"
	"strings"
	"time"

	"github.com/wophost/wophost/sdk/wop"
)

// Refusal is one call Admit must refuse: a row of the table that the
// routed path, a plugin's direct channel and the conformance kit are all
// held to, each answering it with Admit's code and message.
type Refusal struct {
	// Rule names the row, as the kit reports it ("undeclared family",
	// "undeclared facet await: member spelled \"Async\"").
	Rule string
	Call Call
	// Limits are the bounds the call is held to.
	Limits Limits
	// Declared lists what the caller declared.
	Declared []Declaration
	// Code is the refusal's code.
	Code string
}

// Declaration is one thing a caller declared: a family (Facet "") or
// one of its facets.
type Declaration struct{ Family, Facet string }

// Allows reports whether r's caller declared family (facet "") or the
// facet of it: r.Declared as a Declared.
func (r Refusal) Allows(family, facet string) bool {
	return slices.Contains(r.Declared, Declaration{family, facet})
}

// RefusalDepthLimit is the depth limit of the table's calls.
const RefusalDepthLimit = 8

// Refusals returns the refusal table for calls of family.method, whose
// rules are rules, made by caller at now; payload is a request the
// method accepts (a JSON object, "{}" if nil). Each row breaks one rule
// and keeps the others: the family and the facets of its rules are
// declared but for the rows that leave them out, the call is within its depth, size and deadline but for
// the row that exceeds one. A row for every facet rule of the family
// (the method's own, sent to the method it names), in every spelling of
// a member a lax reader could take for the rule's, and for every
// operator-only method, is added.
func Refusals(caller, family, method string, payload []byte, rules Rules, now time.Time) []Refusal {
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	base := Call{Caller: caller, Family: family, Method: method, Payload: payload, Depth: 1, Deadline: now.Add(time.Minute)}
	lim := Limits{DepthLimit: RefusalDepthLimit, MaxBytes: 1 << 20}
	declared := []Declaration{{Family: family}}
	for _, fr := range rules.Facets {
		declared = append(declared, Declaration{family, fr.Facet})
	}
	row := func(rule, code string, edit func(*Refusal)) Refusal {
		r := Refusal{Rule: rule, Call: base, Limits: lim, Declared: declared, Code: code}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	out := []Refusal{
		row("undeclared family", wop.CodeCapabilityNotDeclared, func(r *Refusal) { r.Declared = nil }),
		row("depth over the limit", wop.CodeCallDepthExceeded, func(r *Refusal) { r.Call.Depth = RefusalDepthLimit + 1 }),
		row("request over the size limit", wop.CodeValidation, func(r *Refusal) { r.Limits.MaxBytes = int64(len(payload)) - 1 }),
		row("deadline passed", wop.CodeDeadlineExceeded, func(r *Refusal) { r.Call.Deadline = now.Add(-time.Millisecond) }),
	}
	for _, fr := range rules.Facets {
		m := fr.Method
		if m == wop.EveryMethod {
			m = method
		}
		// The family without the facet.
		at := func(r *Refusal) { r.Call.Method, r.Declared = m, []Declaration{{Family: family}} }
		if fr.When == "" {
			out = append(out, row("undeclared facet "+fr.Facet+" ("+m+")", wop.CodeCapabilityNotDeclared, at))
			continue
		}
		for _, s := range spellings(fr.When) {
			out = append(out, row("undeclared facet "+fr.Facet+" ("+m+"): "+s.what, s.code, func(r *Refusal) {
				at(r)
				r.Call.Payload = []byte(s.payload)
			}))
		}
	}
	for _, m := range rules.OperatorOnly {
		out = append(out, row("operator-only method "+m, wop.CodeCapabilityNotDeclared, func(r *Refusal) { r.Call.Method = m }))
	}
	return out
}

// spelling is one way to ask for a member-decided facet.
type spelling struct{ what, payload, code string }

// spellings are the ways to set the boolean member name to true that a
// reader might take for name: as it is, escaped, in other cases, and
// after a false of the same name.
func spellings(name string) []spelling {
	upper := strings.ToUpper(name)
	title := strings.ToUpper(name[:1]) + name[1:]
	escaped := `\u` + hex4(name[0]) + name[1:]
	out := []spelling{
		{`member "` + name + `"`, `{"` + name + `":true}`, wop.CodeCapabilityNotDeclared},
		{`member escaped "` + escaped + `"`, `{"` + escaped + `":true}`, wop.CodeCapabilityNotDeclared},
		{`member "` + name + `" twice`, `{"` + name + `":false,"` + name + `":true}`, wop.CodeValidation},
	}
	for _, other := range []string{title, upper} {
		if other != name {
			out = append(out, spelling{`member spelled "` + other + `"`, `{"` + other + `":true}`, wop.CodeValidation})
		}
	}
	return out
}

// hex4 is the four hex digits of a JSON \u escape of b.
func hex4(b byte) string {
	const digits = "0123456789abcdef"
	return "00" + string(digits[b>>4]) + string(digits[b&15])
}
