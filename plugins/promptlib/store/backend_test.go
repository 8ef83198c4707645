package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// backendCase is one store implementation the contract tests run on.
type backendCase struct {
	name string
	// open returns n instances of one fresh store: separate handles (file
	// stores on one directory, or pools on one schema), as separate
	// processes would hold.
	open func(t *testing.T, n int) []Backend
	// corrupt alters the stored bytes of digest behind the store's back.
	corrupt func(t *testing.T, b Backend, digest string)
}

func backendCases() []backendCase {
	return []backendCase{
		{
			name: "files",
			open: func(t *testing.T, n int) []Backend {
				dir := t.TempDir()
				var out []Backend
				for range n {
					out = append(out, Files(open(t, dir)))
				}
				return out
			},
			corrupt: func(t *testing.T, b Backend, digest string) {
				path := b.(files).s.blobPath(digest)
				if err := os.Chmod(path, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("---\nname: tampered\n---\nEvil.\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "postgres",
			open: openPostgres,
			corrupt: func(t *testing.T, b Backend, digest string) {
				if _, err := b.(*Postgres).pool.Exec(context.Background(),
					`UPDATE blobs SET body = $2 WHERE digest = $1`, digest, []byte("---\nname: tampered\n---\nEvil.\n")); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
}

// eachBackend runs fn once per backend.
func eachBackend(t *testing.T, fn func(t *testing.T, bc backendCase)) {
	for _, bc := range backendCases() {
		t.Run(bc.name, func(t *testing.T) { fn(t, bc) })
	}
}

func mustPublish(t *testing.T, b Backend, raw string) *PublishResult {
	t.Helper()
	res, err := b.Publish(context.Background(), []byte(raw))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return res
}

// The store contract, once per backend: bytes exact, versions immutable,
// republish idempotent, pins resolved strictly, verify honest.
func TestBackendContract(t *testing.T) {
	eachBackend(t, func(t *testing.T, bc backendCase) {
		ctx := context.Background()
		b := bc.open(t, 1)[0]
		raw := "---\r\nname: t/exact\r\n---\r\nRéponds — «ça» 🙂   \r\n\t"
		first := mustPublish(t, b, raw)
		if first.Version.Version != "1" || first.Seq != 1 || first.Existed || first.Digest != promptlibrary.DigestOf([]byte(raw)) {
			t.Fatalf("first publish: %+v", first)
		}
		v, got, err := b.Get(ctx, mustPin(t, "t/exact@1"))
		if err != nil || string(got) != raw || v.Digest != first.Digest || v.Size != int64(len(raw)) {
			t.Fatalf("get: %+v %q %v", v, got, err)
		}
		if again := mustPublish(t, b, raw); !again.Existed || again.Version.Version != "1" {
			t.Errorf("identical republish: %+v", again)
		}
		second := mustPublish(t, b, "---\nname: t/exact\n---\nTwo.\n")
		if second.Version.Version != "2" || second.Seq != 2 {
			t.Errorf("next integer: %+v", second)
		}
		fixed := "---\nname: t/fixed\nversion: 1.2.0\ndescription: pinned\nvariables:\n  b: {type: string}\n  a: {type: string}\n---\nOne.\n"
		mustPublish(t, b, fixed)
		if _, err := b.Publish(ctx, []byte("---\nname: t/fixed\nversion: 1.2.0\n---\nOther.\n")); !errors.Is(err, ErrVersionExists) {
			t.Errorf("other bytes under 1.2.0: %v, want ErrVersionExists", err)
		}
		if _, err := b.Publish(ctx, []byte("no header")); !errors.Is(err, ErrInvalid) {
			t.Errorf("invalid file: %v, want ErrInvalid", err)
		}

		fv, err := b.Resolve(ctx, mustPin(t, "t/fixed@1.2.0"))
		if err != nil || fv.Description != "pinned" || len(fv.Variables) == 0 {
			t.Errorf("resolve t/fixed@1.2.0: %+v %v", fv, err)
		}
		if v, err := b.Resolve(ctx, mustPin(t, "t/exact@"+first.Digest)); err != nil || v.Version != "1" {
			t.Errorf("resolve by digest: %+v %v", v, err)
		}
		for ref, want := range map[string]error{
			"t/exact@1#" + second.Digest: ErrDigestMismatch,
			"t/exact@9":                  ErrVersionNotFound,
			"t/none@1":                   ErrNotFound,
			"t/exact@sha256:" + fmt.Sprintf("%064d", 0): ErrVersionNotFound,
		} {
			if _, _, err := b.Get(ctx, mustPin(t, ref)); !errors.Is(err, want) {
				t.Errorf("get %s: %v, want %v", ref, err, want)
			}
		}
		if _, err := b.Versions(ctx, "t/none"); !errors.Is(err, ErrNotFound) {
			t.Errorf("versions of an unknown name: %v", err)
		}
		vs, err := b.Versions(ctx, "t/exact")
		if err != nil || len(vs) != 2 || vs[0].Version != "1" || vs[1].Version != "2" {
			t.Errorf("versions: %+v %v", vs, err)
		}
		names, err := b.List(ctx)
		if err != nil || len(names) != 2 || names[0] != (IndexedName{Name: "t/exact", Versions: 2, Last: "2", Digest: second.Digest}) || names[1].Name != "t/fixed" {
			t.Errorf("list: %+v %v", names, err)
		}

		rep, err := b.Verify(ctx)
		if err != nil || !rep.OK() || rep.Names != 2 || rep.Versions != 3 || rep.Blobs != 3 {
			t.Fatalf("verify of a sound store: %+v %v", rep, err)
		}
		bc.corrupt(t, b, first.Digest)
		if _, _, err := b.Get(ctx, mustPin(t, "t/exact@1")); !errors.Is(err, ErrCorrupt) {
			t.Errorf("get of altered bytes: %v, want ErrCorrupt", err)
		}
		rep, err = b.Verify(ctx)
		if err != nil || len(rep.Problems) != 1 || rep.Problems[0].Kind != ProblemCorrupt || rep.Problems[0].Ref != "t/exact@1" {
			t.Errorf("verify of altered bytes: %+v %v", rep, err)
		}
		// The bytes in hand are known to be right: republishing restores them.
		mustPublish(t, b, raw)
		if _, got, err := b.Get(ctx, mustPin(t, "t/exact@1")); err != nil || string(got) != raw {
			t.Errorf("get after the restoring republish: %q %v", got, err)
		}
	})
}

// Eight publishers of one name@version, spread over two store handles:
// with the same bytes every one succeeds and one version exists; with
// different bytes one wins and every other gets ErrVersionExists. Eight
// publishers without a header version get eight distinct versions 1…8.
func TestBackendConcurrentPublishers(t *testing.T) {
	eachBackend(t, func(t *testing.T, bc backendCase) {
		ctx := context.Background()
		stores := bc.open(t, 2)
		const n = 8
		race := func(raw func(i int) string) []error {
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = stores[i%2].Publish(ctx, []byte(raw(i)))
				}()
			}
			close(start)
			wg.Wait()
			return errs
		}

		for i, err := range race(func(int) string { return "---\nname: same\nversion: 3\n---\nSame.\n" }) {
			if err != nil {
				t.Errorf("identical publisher %d: %v", i, err)
			}
		}
		if vs, err := stores[1].Versions(ctx, "same"); err != nil || len(vs) != 1 || vs[0].Version != "3" {
			t.Errorf("identical publishers left %+v %v, want one version", vs, err)
		}

		won := 0
		for i, err := range race(func(i int) string { return fmt.Sprintf("---\nname: differ\nversion: 3\n---\nBody %d.\n", i) }) {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrVersionExists):
				t.Errorf("publisher %d: %v, want ErrVersionExists", i, err)
			}
		}
		vs, err := stores[0].Versions(ctx, "differ")
		if won != 1 || err != nil || len(vs) != 1 {
			t.Errorf("%d publishers of different bytes won, versions %+v %v; want one", won, vs, err)
		}

		for i, err := range race(func(i int) string { return fmt.Sprintf("---\nname: next\n---\nBody %d.\n", i) }) {
			if err != nil {
				t.Errorf("unversioned publisher %d: %v", i, err)
			}
		}
		vs, err = stores[0].Versions(ctx, "next")
		if err != nil || len(vs) != n {
			t.Fatalf("unversioned publishers left %d versions (%v), want %d", len(vs), err, n)
		}
		for i, v := range vs {
			if v.Version != fmt.Sprint(i+1) || v.Seq != i+1 {
				t.Errorf("version %d is %s (seq %d)", i, v.Version, v.Seq)
			}
		}
	})
}
