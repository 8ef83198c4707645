package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wophost/wophost/plugins/promptlib/store"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/wop"
)

// countingStore counts the reads of the prompt bytes that reach the store.
type countingStore struct {
	store.Backend
	gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, pin promptlibrary.Pin) (*store.Version, []byte, error) {
	c.gets.Add(1)
	return c.Backend.Get(ctx, pin)
}

// countedLibrary returns a library over a fresh file store holding raws,
// its reads counted, with a version cache of cacheBytes.
func countedLibrary(t *testing.T, cacheBytes int64, raws ...string) (*library, *countingStore, []store.Version) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "prompts"))
	if err != nil {
		t.Fatal(err)
	}
	var vs []store.Version
	for _, raw := range raws {
		res, err := s.Publish(context.Background(), []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, res.Version)
	}
	cs := &countingStore{Backend: store.Files(s)}
	l := newLibrary()
	l.store, l.versions = cs, newVersionCache(cacheBytes)
	return l, cs, vs
}

// get calls the plugin's Get and checks the answer is raw.
func get(t *testing.T, l *library, ref, raw string) {
	t.Helper()
	p, err := l.Get(context.Background(), nil, &promptlibrary.GetRequest{PromptID: ref})
	if err != nil {
		t.Fatalf("get %s: %v", ref, err)
	}
	if p.Raw != raw || p.Digest != promptlibrary.DigestOf([]byte(raw)) {
		t.Fatalf("get %s = %q %s, want %q", ref, p.Raw, p.Digest, raw)
	}
}

func promptRaw(name string, n int) string {
	return fmt.Sprintf("---\nname: %s\n---\n%s\n", name, strings.Repeat("x", n))
}

// A version read once is answered again without the store, whether the
// pin carries its digest or not.
func TestCacheHitsAvoidTheStore(t *testing.T) {
	raw := promptRaw("demo/a", 100)
	l, cs, vs := countedLibrary(t, defaultCacheBytes, raw)
	full := vs[0].Pin().String()
	get(t, l, "demo/a@1", raw)
	get(t, l, "demo/a@1", raw)
	get(t, l, full, raw)
	if n := cs.gets.Load(); n != 1 {
		t.Errorf("three gets of one version read the store %d times, want 1", n)
	}
	// A pin by digest alone is not keyed by version: it goes to the store.
	get(t, l, "demo/a@"+vs[0].Digest, raw)
	if n := cs.gets.Load(); n != 2 {
		t.Errorf("after a get by digest the store was read %d times, want 2", n)
	}
}

// A pin whose digest is not the cached version's is never answered from
// the cache: the store refuses it, every time.
func TestCacheDigestMismatchGoesToTheStore(t *testing.T) {
	raw, other := promptRaw("demo/a", 10), promptRaw("demo/a", 11)
	l, cs, _ := countedLibrary(t, defaultCacheBytes, raw)
	get(t, l, "demo/a@1", raw)
	wrong := "demo/a@1#" + promptlibrary.DigestOf([]byte(other))
	for i := range 2 {
		_, err := l.Get(context.Background(), nil, &promptlibrary.GetRequest{PromptID: wrong})
		if code := wop.CodeOf(err); code != promptlibrary.CodePromptDigestMismatch {
			t.Fatalf("get %s (try %d): %v, want %s", wrong, i, err, promptlibrary.CodePromptDigestMismatch)
		}
	}
	if n := cs.gets.Load(); n != 3 {
		t.Errorf("store read %d times, want 3 (the first get and both mismatches)", n)
	}
	get(t, l, "demo/a@1", raw)
	if n := cs.gets.Load(); n != 3 {
		t.Errorf("the version is no longer cached after the mismatches: %d store reads, want 3", n)
	}
}

// With cache_bytes 0 every get reads the store.
func TestCacheOff(t *testing.T) {
	raw := promptRaw("demo/a", 10)
	l, cs, _ := countedLibrary(t, 0, raw)
	for range 3 {
		get(t, l, "demo/a@1", raw)
	}
	if n := cs.gets.Load(); n != 3 {
		t.Errorf("store read %d times with the cache off, want 3", n)
	}
}

// The cache holds at most its bound: versions that fit exactly both
// stay; one byte less and the least recently used one goes.
func TestCacheByteBound(t *testing.T) {
	raws := []string{promptRaw("demo/a", 100), promptRaw("demo/b", 200), promptRaw("demo/c", 50)}
	_, _, vs := countedLibrary(t, 0, raws...)
	cost := func(i int) int64 { return entryCost(&vs[i], []byte(raws[i])) }
	cached := func(c *versionCache, i int) bool {
		_, _, ok := c.get(vs[i].Pin())
		return ok
	}

	exact := newVersionCache(cost(0) + cost(1))
	exact.put(&vs[0], []byte(raws[0]))
	exact.put(&vs[1], []byte(raws[1]))
	if !cached(exact, 0) || !cached(exact, 1) || exact.bytes() != cost(0)+cost(1) {
		t.Errorf("a bound of exactly two versions kept a %v, b %v, %d bytes", cached(exact, 0), cached(exact, 1), exact.bytes())
	}

	short := newVersionCache(cost(0) + cost(1) - 1)
	short.put(&vs[0], []byte(raws[0]))
	short.put(&vs[1], []byte(raws[1]))
	if cached(short, 0) || !cached(short, 1) || short.bytes() != cost(1) {
		t.Errorf("one byte short of two versions: a %v (want false), b %v (want true), %d bytes", cached(short, 0), cached(short, 1), short.bytes())
	}

	// Least recently used goes first: a was read after b, so c evicts b.
	lru := newVersionCache(cost(0) + cost(1) + cost(2) - 1)
	lru.put(&vs[0], []byte(raws[0]))
	lru.put(&vs[1], []byte(raws[1]))
	cached(lru, 0)
	lru.put(&vs[2], []byte(raws[2]))
	if !cached(lru, 0) || cached(lru, 1) || !cached(lru, 2) {
		t.Errorf("after a, b, get a, c: a %v b %v c %v, want true false true", cached(lru, 0), cached(lru, 1), cached(lru, 2))
	}

	// A version larger than the whole bound is not cached and evicts
	// nothing.
	tiny := newVersionCache(cost(1) - 1)
	tiny.put(&vs[0], []byte(raws[0]))
	tiny.put(&vs[1], []byte(raws[1]))
	if !cached(tiny, 0) || cached(tiny, 1) || tiny.bytes() != cost(0) {
		t.Errorf("a version over the bound: a %v b %v, %d bytes", cached(tiny, 0), cached(tiny, 1), tiny.bytes())
	}
}

// Many gets at once, on a cache too small for all the versions, each
// answer the version asked for and keep the cache within its bound.
func TestCacheConcurrentGets(t *testing.T) {
	var raws []string
	for i := range 8 {
		raws = append(raws, promptRaw(fmt.Sprintf("demo/p%d", i), 100+i))
	}
	_, _, vs := countedLibrary(t, 0, raws...)
	bound := 3 * entryCost(&vs[0], []byte(raws[0]))
	l, cs, _ := countedLibrary(t, bound, raws...)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				k := (g + i) % len(raws)
				p, err := l.Get(context.Background(), nil, &promptlibrary.GetRequest{PromptID: vs[k].Pin().String()})
				if err == nil && p.Raw != raws[k] {
					err = fmt.Errorf("get %s answered %q", vs[k].Pin(), p.Raw)
				}
				if err != nil {
					errs <- err
					return
				}
				if n := l.versions.bytes(); n > bound {
					errs <- fmt.Errorf("cache holds %d bytes, bound %d", n, bound)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := cs.gets.Load(); n == 0 || n == 16*200 {
		t.Errorf("store read %d times of %d gets: the cache answered none or all", n, 16*200)
	}
}

// cache_bytes takes a whole number of bytes from 0 up; anything else is
// refused naming the attribute.
func TestConfigureCacheBytes(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int64 // -1: refused
	}{
		{`0`, 0},
		{`1024`, 1024},
		{fmt.Sprint(maxCacheBytes), maxCacheBytes},
		{`-1`, -1},
		{fmt.Sprint(maxCacheBytes + 1), -1},
		{`1.5`, -1},
	} {
		l := newLibrary()
		req := &plugin.ConfigureRequest{Config: json.RawMessage(`{"cache_bytes": ` + tc.value + `}`), StateDir: t.TempDir()}
		err := l.configure(context.Background(), req)
		var ce *plugin.ConfigError
		switch {
		case tc.want < 0 && (!errors.As(err, &ce) || len(ce.Path) != 1 || ce.Path[0] != "cache_bytes"):
			t.Errorf("cache_bytes = %s: %v, want a config error naming cache_bytes", tc.value, err)
		case tc.want >= 0 && err != nil:
			t.Errorf("cache_bytes = %s: %v", tc.value, err)
		case tc.want >= 0 && l.versions.max != tc.want:
			t.Errorf("cache_bytes = %s: bound %d", tc.value, l.versions.max)
		}
	}
	l := newLibrary()
	if err := l.configure(context.Background(), &plugin.ConfigureRequest{Config: json.RawMessage(`{}`), StateDir: t.TempDir()}); err != nil || l.versions.max != defaultCacheBytes {
		t.Errorf("no cache_bytes: bound %d (%v), want %d", l.versions.max, err, defaultCacheBytes)
	}
}
