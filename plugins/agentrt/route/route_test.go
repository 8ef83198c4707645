package route

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wophost/wophost/sdk/families/agentruntime"
)

var team = []Candidate{
	{ID: "agt_writer", Name: "Writer", Description: "Writes clear prose and edits drafts.",
		Skills: []agentruntime.Skill{{ID: "copy-editing", Description: "Polish the wording of a text", Tags: []string{"prose"}}}},
	{ID: "agt_research", Name: "Researcher", Description: "Finds sources and returns a cited summary.",
		Skills: []agentruntime.Skill{{ID: "literature-search", Description: "Search papers and summarize them", Tags: []string{"papers", "citations"}}}},
	{ID: "agt_generalist", Name: "Generalist", Description: "Search, summarize, write: a bit of everything."},
}

func TestTerms(t *testing.T) {
	got := strings.Join(Terms("Please SEARCH the papers, then search again: café-au-lait x 42"), ",")
	if want := "search,papers,again,café,au,lait,42"; got != want {
		t.Errorf("Terms = %s, want %s", got, want)
	}
}

func TestTaskText(t *testing.T) {
	cases := map[string]string{
		`"find papers"`: "find papers",
		`{"b":"second","a":["first",1,true],"c":{"d":"third"}}`: "first second third",
		`12`:       "",
		`not json`: "",
	}
	for in, want := range cases {
		if got := TaskText(json.RawMessage(in)); got != want {
			t.Errorf("TaskText(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestScoreWeights(t *testing.T) {
	r := team[1]
	cases := []struct {
		task string
		want float64
	}{
		{"papers citations", 1},           // two skill tags: 3+3 of 6
		{"summarize", 2.0 / 3},            // skill description: 2 of 3
		{"cited", 1.0 / 3},                // agent description: 1 of 3
		{"papers cooking", 0.5},           // 3 of 6
		{"cooking recipes", 0},            // nothing
		{"the and of", 0},                 // stop words only: no terms
		{"LITERATURE search papers", 1.0}, // skill id terms and a tag
	}
	for _, c := range cases {
		if got := Score(c.task, r); got != c.want {
			t.Errorf("Score(%q) = %v, want %v", c.task, got, c.want)
		}
	}
}

func TestBestMatch(t *testing.T) {
	cases := []struct {
		task string
		want string
	}{
		{"Search recent papers on protein folding and list citations", "agt_research"},
		{"Edit this prose for clarity", "agt_writer"},
		// "search" and "summarize": skill tags/descriptions of the
		// researcher (3+2) beat the generalist's description (1+1).
		{"search and summarize", "agt_research"},
		// Nothing matches anyone: every score is 0, the first listed wins.
		{"bake bread", "agt_writer"},
	}
	for _, c := range cases {
		if i := BestMatch(c.task, team); team[i].ID != c.want {
			t.Errorf("BestMatch(%q) = %s (scores %v), want %s", c.task, team[i].ID, Scores(c.task, team), c.want)
		}
	}
	// Equal scores go to the candidate listed first, whatever the order.
	twins := []Candidate{{ID: "b", Description: "search"}, {ID: "a", Description: "search"}}
	if i := BestMatch("search", twins); twins[i].ID != "b" {
		t.Errorf("tie went to %s", twins[i].ID)
	}
	if BestMatch("x", nil) != -1 {
		t.Error("BestMatch of no candidates is not -1")
	}
}

func TestLeastLoaded(t *testing.T) {
	cands := []Candidate{{ID: "a", InFlight: 2}, {ID: "b", InFlight: 1}, {ID: "c", InFlight: 1}, {ID: "d", InFlight: 3}}
	if i := LeastLoaded(cands); cands[i].ID != "b" {
		t.Errorf("LeastLoaded = %s, want b", cands[i].ID)
	}
	if LeastLoaded(nil) != -1 {
		t.Error("LeastLoaded of no candidates is not -1")
	}
}

func TestEscalates(t *testing.T) {
	half := 0.5
	zero := 0.0
	if Escalates(0.1, nil) || !Escalates(0.49, &half) || Escalates(0.5, &half) || Escalates(0, &zero) {
		t.Error("Escalates does not compare strictly below the threshold")
	}
}
