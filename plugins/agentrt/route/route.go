// Package route chooses which agent a delegated task goes to. Every
// choice is a pure function of its inputs, so a replayed run picks the
// same agent.
//
// # Best-match scoring
//
// The task and each candidate are reduced to terms: maximal runs of
// Unicode letters and digits, lower-cased, at least two characters long,
// minus a fixed list of English stop words. No stemming is done. Each
// distinct task term earns the weight of the best place it appears in the
// candidate's manifest:
//
//	3  a skill id or a skill tag
//	2  a skill description
//	1  the agent's name or description
//	0  nowhere
//
// The score is the sum of those weights divided by 3 × the number of
// distinct task terms, so it lies in [0, 1]: 1 when every task term is a
// skill id or tag of the agent, 0 when none appears anywhere (or the task
// has no terms). The highest score wins; equal scores go to the candidate
// listed first.
//
// # Load balancing
//
// load-balanced picks the candidate with the least work in flight (the
// caller counts it; the runtime counts running tasks plus queued mailbox
// messages); equal loads go to the candidate listed first.
package route

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"unicode"

	"github.com/wophost/wophost/sdk/families/agentruntime"
)

// Weights of the places a task term can appear in, and the best of them.
const (
	WeightSkill            = 3
	WeightSkillDescription = 2
	WeightDescription      = 1
)

// Candidate is one agent a task may go to.
type Candidate struct {
	// ID is the agent instance id.
	ID          string
	Name        string
	Description string
	Skills      []agentruntime.Skill
	// InFlight is the candidate's work in flight, for load balancing.
	InFlight int
}

// stopWords are dropped from every text: they say nothing about which
// agent suits a task.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"can": true, "do": true, "does": true, "for": true, "from": true, "has": true, "have": true,
	"how": true, "in": true, "into": true, "is": true, "it": true, "its": true, "me": true,
	"my": true, "of": true, "on": true, "or": true, "our": true, "please": true, "should": true,
	"so": true, "that": true, "the": true, "their": true, "then": true, "this": true, "to": true,
	"us": true, "was": true, "we": true, "what": true, "when": true, "where": true, "which": true,
	"who": true, "why": true, "will": true, "with": true, "would": true, "you": true, "your": true,
}

// Terms returns the distinct terms of text in order of first appearance.
func Terms(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len([]rune(f)) < 2 || stopWords[f] || seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	return out
}

// TaskText is the text of a task for scoring: a JSON string as it is;
// for any other JSON value, every string inside it (object members in
// key order, array elements in order) joined by spaces. Numbers, booleans
// and object keys are left out.
func TaskText(task json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(task))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return ""
	}
	var parts []string
	collectStrings(v, &parts)
	return strings.Join(parts, " ")
}

func collectStrings(v any, out *[]string) {
	switch t := v.(type) {
	case string:
		*out = append(*out, t)
	case []any:
		for _, e := range t {
			collectStrings(e, out)
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			collectStrings(t[k], out)
		}
	}
}

// rawScore sums the weight of each task term for c.
func rawScore(terms []string, c Candidate) int {
	weights := map[string]int{}
	mark := func(text string, w int) {
		for _, t := range Terms(text) {
			if weights[t] < w {
				weights[t] = w
			}
		}
	}
	mark(c.Name, WeightDescription)
	mark(c.Description, WeightDescription)
	for _, s := range c.Skills {
		mark(s.Description, WeightSkillDescription)
		mark(s.ID, WeightSkill)
		for _, tag := range s.Tags {
			mark(tag, WeightSkill)
		}
	}
	sum := 0
	for _, t := range terms {
		sum += weights[t]
	}
	return sum
}

// Score returns c's best-match score for the task text, in [0, 1].
func Score(task string, c Candidate) float64 {
	terms := Terms(task)
	if len(terms) == 0 {
		return 0
	}
	return float64(rawScore(terms, c)) / float64(WeightSkill*len(terms))
}

// Scores returns every candidate's best-match score for the task text, in
// candidate order.
func Scores(task string, cands []Candidate) []float64 {
	out := make([]float64, len(cands))
	for i, c := range cands {
		out[i] = Score(task, c)
	}
	return out
}

// BestMatch returns the index of the candidate with the highest score
// (the first one on a tie), or -1 when there is no candidate.
func BestMatch(task string, cands []Candidate) int {
	terms := Terms(task)
	best, bestRaw := -1, -1
	for i, c := range cands {
		// Raw integer sums share one denominator, so comparing them is
		// exact where comparing the divided floats might not be.
		if r := rawScore(terms, c); r > bestRaw {
			best, bestRaw = i, r
		}
	}
	return best
}

// LeastLoaded returns the index of the candidate with the least work in
// flight (the first one on a tie), or -1 when there is no candidate.
func LeastLoaded(cands []Candidate) int {
	best := -1
	for i, c := range cands {
		if best < 0 || c.InFlight < cands[best].InFlight {
			best = i
		}
	}
	return best
}

// Escalates reports whether a selected candidate's score falls below the
// escalation threshold. A nil threshold never escalates.
func Escalates(score float64, threshold *float64) bool {
	return threshold != nil && score < *threshold
}
