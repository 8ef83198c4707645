package canonjson

import (
	"testing"

	"github.com/gowebpki/jcs"
)

// benchPayload is the request of the ctx-call benchmarks (test/bench).
var benchPayload = []byte(`{"id":"bench-0001","kind":"echo","n":42,"ok":true,"tags":["alpha","beta","gamma"],` +
	`"text":"the quick brown fox jumps over the lazy dog, then does it again for good measure",` +
	`"ts":"2026-01-01T00:00:00Z"}`)

// BenchmarkTransform and BenchmarkJCSTransform compare this package with
// the library it is held to, on one request.
func BenchmarkTransform(b *testing.B) {
	for b.Loop() {
		if _, err := Transform(benchPayload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJCSTransform(b *testing.B) {
	for b.Loop() {
		if _, err := jcs.Transform(benchPayload); err != nil {
			b.Fatal(err)
		}
	}
}
