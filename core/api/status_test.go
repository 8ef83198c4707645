package api

import (
	"testing"
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
