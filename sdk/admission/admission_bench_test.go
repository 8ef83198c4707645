package admission

import (
	"testing"
	"time"
)

// benchGenerate is a generate request of a typical size, whose async
// member a rule decides on.
var benchGenerate = []byte(`{"envelopeType":"summary","systemPrompt":"You summarise support tickets in two sentences.","userMessage":"The printer on the third floor jams whenever a job has more than ten pages; it started after the firmware update last week.","provider":"local","model":"rules","maxTokens":256,"idempotencyKey":"ticket-4711","async":false}`)

// BenchmarkAdmit admits a call whose family has no rule (the baseline)
// and a generate whose facet depends on its async member, read strictly
// from the whole request.
func BenchmarkAdmit(b *testing.B) {
	declared := func(string, string) bool { return true }
	lim := Limits{DepthLimit: 8, MaxBytes: 4 << 20}
	for _, bc := range []struct {
		name  string
		rules Rules
	}{
		{"no-rule", Rules{}},
		{"member-rule", aiRules},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := Call{Caller: "pack p node p.n", Family: "aiEnvelope", Method: "generate", Payload: benchGenerate, Depth: 1, Deadline: time.Now().Add(time.Hour)}
			b.ReportAllocs()
			for b.Loop() {
				if _, refusal := Admit(c, lim, declared, bc.rules, time.Now()); refusal != nil {
					b.Fatal(refusal)
				}
			}
		})
	}
}
