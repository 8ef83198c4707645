package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestClaimCompleteAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "env.db")
	s := open(t, path)
	now := time.UnixMilli(1_700_000_000_000)
	e := &Envelope{Key: "k1", Digest: "d1", ID: "env_1", Type: "t", Async: true, Request: []byte(`{}`), CreatedAt: now}
	if cur, ok, err := s.Claim(ctx, e); err != nil || !ok || cur != nil {
		t.Fatalf("first claim: %v %v %v", cur, ok, err)
	}
	again := &Envelope{Key: "k1", Digest: "d2", ID: "env_2", Type: "t", Request: []byte(`{}`), CreatedAt: now}
	cur, ok, err := s.Claim(ctx, again)
	if err != nil || ok || cur.ID != "env_1" || cur.Digest != "d1" || cur.State != StatePending {
		t.Fatalf("second claim: %+v %v %v", cur, ok, err)
	}
	pend, err := s.Pending(ctx)
	if err != nil || len(pend) != 1 || pend[0].ID != "env_1" || !pend[0].Async {
		t.Fatalf("pending: %+v %v", pend, err)
	}
	if err := s.Complete(ctx, "env_1", []byte(`{"ok":true}`), now); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "env_1", []byte(`{}`), now); err == nil {
		t.Error("completing twice succeeded")
	}
	s.Close()

	s2 := open(t, path)
	got, err := s2.Get(ctx, "env_1")
	if err != nil || got.State != StateCompleted || string(got.Result) != `{"ok":true}` || !got.FinishedAt.Equal(now) {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	if _, err := s2.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}

func TestFailedEnvelopeIsReplacedByTheSameRequestOnly(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "env.db"))
	now := time.Now()
	if _, _, err := s.Claim(ctx, &Envelope{Key: "k", Digest: "d", ID: "a", Type: "t", Request: []byte(`{}`), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(ctx, "a", []byte(`{"code":"x"}`), now); err != nil {
		t.Fatal(err)
	}
	if cur, ok, err := s.Claim(ctx, &Envelope{Key: "k", Digest: "other", ID: "b", Type: "t", Request: []byte(`{}`), CreatedAt: now}); err != nil || ok || cur.State != StateFailed {
		t.Fatalf("different request on a failed key: %+v %v %v", cur, ok, err)
	}
	if _, ok, err := s.Claim(ctx, &Envelope{Key: "k", Digest: "d", ID: "c", Type: "t", Request: []byte(`{}`), CreatedAt: now}); err != nil || !ok {
		t.Fatalf("same request on a failed key: %v %v", ok, err)
	}
	if err := s.Release(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Claim(ctx, &Envelope{Key: "k", Digest: "z", ID: "d", Type: "t", Request: []byte(`{}`), CreatedAt: now}); err != nil || !ok {
		t.Fatalf("released key: %v %v", ok, err)
	}
}
