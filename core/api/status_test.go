package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/wophost/wophost/core/host"
)

func TestETagMatches(t *testing.T) {
	const tag = `"abc"`
	for header, want := range map[string]bool{
		`"abc"`: true, `W/"abc"`: true, `"x", "abc"`: true, `*`: true,
		`"abcd"`: false, ``: false, `abc`: false,
	} {
		if got := etagMatches(header, tag); got != want {
			t.Errorf("etagMatches(%q) = %v, want %v", header, got, want)
		}
	}
}

func TestAuthorized(t *testing.T) {
	s := New(NewCurrent(nil), Options{Tokens: []string{"one", "two"}})
	for header, want := range map[string]bool{
		"Bearer one": true, "bearer two": true, "Bearer  two ": true,
		"Bearer three": false, "Bearer ": false, "Basic one": false, "one": false, "": false,
	} {
		if got := s.authorized(header); got != want {
			t.Errorf("authorized(%q) = %v, want %v", header, got, want)
		}
	}
}

// A wrong token is refused whatever it shares with the right one: a part
// of its text, or the leading bytes of its SHA-256 sum, which is what the
// comparison reads.
func TestAuthorizedComparesTheWholeSum(t *testing.T) {
	const token = "one"
	sum := sha256.Sum256([]byte(token))
	wrong := []string{"on", "one1", "onf", "ONE", "one one"}
	// The first guesses whose sums share one, then two, leading bytes
	// with the token's.
	for _, n := range []int{1, 2} {
		for i := 0; ; i++ {
			guess := "guess" + strconv.Itoa(i)
			if g := sha256.Sum256([]byte(guess)); bytes.Equal(g[:n], sum[:n]) {
				wrong = append(wrong, guess)
				break
			}
		}
	}
	f := newFake()
	f.res = &host.RunResult{RunID: "run_1", Output: json.RawMessage(`{}`)}
	s := New(NewCurrent(f), Options{Tokens: []string{token}})
	accepted := 0
	for _, w := range wrong {
		if rec := execute(t, s, `{}`, map[string]string{"Authorization": "Bearer " + w}); rec.Code != http.StatusUnauthorized {
			accepted++
			t.Errorf("token %q: %d %s, want 401", w, rec.Code, rec.Body)
		}
	}
	if accepted != 0 || f.calls != 0 {
		t.Fatalf("%d of %d wrong tokens accepted, %d runs started", accepted, len(wrong), f.calls)
	}
	// The right token runs the node: the refusals above were the token's.
	if rec := execute(t, s, `{}`, map[string]string{"Authorization": "Bearer " + token}); rec.Code != http.StatusOK || f.calls != 1 {
		t.Fatalf("the right token: %d %s, %d runs", rec.Code, rec.Body, f.calls)
	}
}
