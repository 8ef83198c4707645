package main

import (
	"container/list"
	"sync"

	"github.com/wophost/wophost/plugins/promptlib/store"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
)

// defaultCacheBytes bounds the version cache when the config sets no
// cache_bytes: thousands of typical prompts.
const defaultCacheBytes = 16 << 20

// maxCacheBytes is the largest cache_bytes the config accepts.
const maxCacheBytes = 1 << 30

// entryOverhead is what an entry costs besides its strings and bytes:
// the list element, the map slot and the record's fixed fields. It keeps
// a bound counted in bytes honest for many tiny prompts.
const entryOverhead = 256

// versionKey names one version of one prompt.
type versionKey struct{ name, version string }

// cachedVersion is a version whose bytes hashed to its digest when the
// store returned them.
type cachedVersion struct {
	key  versionKey
	v    store.Version
	raw  []byte
	cost int64
}

// versionCache holds pinned versions already read, so that a get of one
// answers without the store: a version is immutable, so what was read
// and verified once stays the answer. It is bounded in bytes and evicts
// the least recently used version first. It is safe for concurrent use.
type versionCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // of *cachedVersion, most recently used first
	entries map[versionKey]*list.Element
}

// newVersionCache returns a cache holding at most max bytes; 0 caches
// nothing.
func newVersionCache(max int64) *versionCache {
	return &versionCache{max: max, order: list.New(), entries: map[versionKey]*list.Element{}}
}

// entryCost is what v and raw count against the bound.
func entryCost(v *store.Version, raw []byte) int64 {
	return int64(entryOverhead + len(raw) + len(v.Name) + len(v.Version) + len(v.Digest) +
		len(v.EnvelopeType) + len(v.Description) + len(v.Variables))
}

// get returns the cached version pin names, or false. A pin without a
// version (a digest alone) is never answered here, nor is one whose
// digest differs from the cached version's: the store says why.
func (c *versionCache) get(pin promptlibrary.Pin) (*store.Version, []byte, bool) {
	if pin.Version == "" {
		return nil, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[versionKey{pin.Name, pin.Version}]
	if !ok {
		return nil, nil, false
	}
	cv := e.Value.(*cachedVersion)
	if pin.Digest != "" && pin.Digest != cv.v.Digest {
		return nil, nil, false
	}
	c.order.MoveToFront(e)
	v := cv.v
	return &v, cv.raw, true
}

// put caches v and raw, which the store has just checked against
// v.Digest. Callers must not modify raw afterwards. A version larger than
// the whole bound is not cached.
func (c *versionCache) put(v *store.Version, raw []byte) {
	cost := entryCost(v, raw)
	if cost > c.max {
		return
	}
	key := versionKey{v.Name, v.Version}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		// Another get read the same version meanwhile.
		c.order.MoveToFront(e)
		return
	}
	for c.size+cost > c.max {
		c.evict(c.order.Back())
	}
	c.entries[key] = c.order.PushFront(&cachedVersion{key: key, v: *v, raw: raw, cost: cost})
	c.size += cost
}

// evict drops e. c.mu must be held.
func (c *versionCache) evict(e *list.Element) {
	cv := c.order.Remove(e).(*cachedVersion)
	delete(c.entries, cv.key)
	c.size -= cv.cost
}

// bytes returns what the cached versions count against the bound.
func (c *versionCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
