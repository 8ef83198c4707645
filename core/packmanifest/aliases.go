package packmanifest

import (
	_ "embed"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/wophost/wophost/sdk/wop"
)

// v1AliasesJSON is the v1 alias table: the v1 spellings of peer
// dependencies that OpenWOP v2 still reads during the overlap, each with
// the family (and facet) it stands for.
//
//go:embed v1aliases.json
var v1AliasesJSON []byte

// alias is what a v1 spelling stands for.
type alias struct {
	Family string `json:"family"`
	Facet  string `json:"facet,omitempty"`
}

// aliasTable is the decoded v1 alias table, built once and never changed.
var aliasTable = v1Aliases()

// v1Aliases decodes the embedded table. The file is part of the source
// and TestV1AliasTable checks it, so a decoding failure is a build
// mistake: the table is then empty and every v1 spelling is refused,
// which the tests see at once.
func v1Aliases() map[string]alias {
	var table struct {
		Aliases map[string]alias `json:"aliases"`
	}
	_ = json.Unmarshal(v1AliasesJSON, &table)
	return table.Aliases
}

// V1Aliases returns a copy of the v1 alias table: v1 spelling to
// "family" or "family.facet".
func V1Aliases() map[string]string {
	out := make(map[string]string, len(aliasTable))
	for k, a := range aliasTable {
		out[k] = Requirement{Family: a.Family, Facet: a.Facet}.String()
	}
	return out
}

// declarationKeys are the names a peerDependencies key is compared with
// for a did-you-mean: the core families, then the v1 spellings, sorted.
func declarationKeys() []string {
	return append(wop.CoreFamilies(), sortedKeys(aliasTable)...)
}

// didYouMean returns the candidate closest to s when it is close enough
// to be a slip of the keyboard or of letter case, "" otherwise. Ties go
// to the earlier candidate.
func didYouMean(s string, candidates []string) string {
	best, bestDist := "", -1
	limit := 1 + utf8.RuneCountInString(s)/4
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d <= limit && (bestDist < 0 || d < bestDist) && c != s {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counted in
// runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
