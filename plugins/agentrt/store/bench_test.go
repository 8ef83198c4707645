package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkEnqueue measures one durable messageSend: a write transaction
// with synchronous=FULL, so each op includes an fsync of the WAL.
func BenchmarkEnqueue(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "a.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	inst, _, err := s.CreateInstance(context.Background(), NewInstance{ManifestID: "m", ManifestDigest: "d", Manifest: []byte(`{}`), IdempotencyKey: "k", RequestDigest: "r"}, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := send(s, inst.ID, "x", fmt.Sprint("k", i), `{"n":1}`, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimAck measures reading one message from a mailbox and
// acknowledging it.
func BenchmarkClaimAck(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "a.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	inst, _, err := s.CreateInstance(ctx, NewInstance{ManifestID: "m", ManifestDigest: "d", Manifest: []byte(`{}`), IdempotencyKey: "k", RequestDigest: "r"}, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if _, _, err := send(s, inst.ID, "x", fmt.Sprint("k", i), `{"n":1}`, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		ms, err := s.Claim(ctx, inst.ID, 1, time.Minute)
		if err != nil || len(ms) != 1 {
			b.Fatalf("claim: %d, %v", len(ms), err)
		}
		if err := s.Ack(ctx, []string{ms[0].ID}); err != nil {
			b.Fatal(err)
		}
	}
}
