package testbin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Cache builds each package at most once into one directory, so test files
// of different families can ask for the binaries they need without a shared
// list in TestMain.
type Cache struct {
	dir string

	mu    sync.Mutex
	built map[string]*cacheEntry
}

type cacheEntry struct {
	once sync.Once
	path string
	err  error
}

// NewCache returns a Cache that writes binaries into dir.
func NewCache(dir string) *Cache {
	return &Cache{dir: dir, built: map[string]*cacheEntry{}}
}

// Binary builds pkg (a path relative to the repository root, such as
// "./plugins/mcp") on first use and returns the binary's path.
func (c *Cache) Binary(pkg string) (string, error) {
	return c.build(pkg, func(out string) error { return Build(map[string]string{out: pkg}) })
}

// build runs make, once per key, to write the file the key names under
// the cache, and returns its path.
func (c *Cache) build(key string, make func(out string) error) (string, error) {
	c.mu.Lock()
	e, ok := c.built[key]
	if !ok {
		e = &cacheEntry{}
		c.built[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() {
		name := strings.NewReplacer("/", "_", ":", "_").Replace(strings.Trim(filepath.ToSlash(filepath.Clean(key)), "./"))
		e.path = filepath.Join(c.dir, "cache", name)
		if e.err = os.MkdirAll(filepath.Dir(e.path), 0o755); e.err != nil {
			return
		}
		e.err = make(e.path)
	})
	return e.path, e.err
}

// isWasmPack reports whether the pack at srcRel is a WebAssembly pack.
func isWasmPack(srcRel string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(SourceDir(srcRel), "pack.json"))
	if err != nil {
		return false, err
	}
	var m struct {
		Runtime struct {
			Language string `json:"language"`
		} `json:"runtime"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return false, fmt.Errorf("%s/pack.json: %w", srcRel, err)
	}
	return m.Runtime.Language == "wasm", nil
}

// Pack builds the pack at srcRel (relative to the repository, such as
// "examples/packs/kvdemo") on first use, lays it out in a directory of its
// own under the cache and returns that directory. Callers must not write
// into it; lay out a private copy with LayOutPack for that.
//
// A WebAssembly pack (runtime.language "wasm") is built as a module for
// wasip1, as `make build` builds it.
func (c *Cache) Pack(srcRel string) (string, error) {
	pkg := "./" + strings.TrimPrefix(srcRel, "./")
	wasm, err := isWasmPack(srcRel)
	if err != nil {
		return "", err
	}
	var binary string
	if wasm {
		binary, err = c.build("wasm:"+pkg, func(out string) error { return BuildWasm(out, pkg) })
	} else {
		binary, err = c.Binary(pkg)
	}
	if err != nil {
		return "", err
	}
	dst := filepath.Join(c.dir, "packs", strings.ReplaceAll(strings.Trim(srcRel, "./"), "/", "_"))
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := os.Stat(filepath.Join(dst, "pack.json")); err == nil {
		return dst, nil
	}
	if err := LayOutPack(srcRel, binary, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// MustBinary is Binary for a test or benchmark: a build failure fails tb.
func (c *Cache) MustBinary(tb testing.TB, pkg string) string {
	tb.Helper()
	path, err := c.Binary(pkg)
	if err != nil {
		tb.Fatal(err)
	}
	return path
}
