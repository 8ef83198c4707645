package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wophost/wophost/internal/pgstore"
	"github.com/wophost/wophost/internal/promptfile"
	"github.com/wophost/wophost/plugins/promptlib/store"
	"github.com/wophost/wophost/sdk/families/promptlibrary"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// config is the plugin's config block.
type config struct {
	Dir        *string  `json:"dir"`
	CacheBytes *float64 `json:"cache_bytes"`
}

// parsedCacheSize bounds the parsed-header cache. Parsing (YAML and a
// JSON Schema compile) costs more than reading and hashing a prompt.
const parsedCacheSize = 1024

// library serves promptLibrary from a store opened at Configure.
type library struct {
	mu    sync.RWMutex
	store store.Backend
	// versions caches what store returned for pinned versions; it is
	// replaced with the store, so it only ever holds that store's versions.
	versions *versionCache
	// parsed caches promptfile.Parse by digest. Parsing is a pure function
	// of the bytes, and only bytes that hashed to their digest when read
	// from the store are parsed, so the cache never lets a corrupted blob
	// through.
	parsed map[string]*promptfile.File
}

// newLibrary returns a library with no store until Configure, and a
// version cache of the default size.
func newLibrary() *library {
	return &library{versions: newVersionCache(defaultCacheBytes), parsed: map[string]*promptfile.File{}}
}

func newPlugin() *plugin.Plugin {
	l := newLibrary()
	family := promptlibrary.NewFamily(l)
	family.Status, family.Since, family.Witness = wop.StatusStable, "2.0", wop.WitnessClaimsCheck
	return &plugin.Plugin{
		Name:    "wophost-promptlib",
		Version: "0.1.0",
		ConfigSchema: schema.Block{Attributes: []schema.Attribute{
			{Name: "dir", Type: schema.String, Description: `prompt store directory of the embedded storage backend: relative to the plugin's state directory (state_dir/plugins/<label>), or absolute (default "store"); with the postgres backend the prompts are kept in the database`},
			{Name: "cache_bytes", Type: schema.Number, Whole: true, Min: schema.Bound(0), Max: schema.Bound(maxCacheBytes), Description: "bytes of pinned versions kept in memory once read and verified, so that a get of one needs no store read; least recently used evicted first; 0 turns the cache off (default 16 MiB)"},
		}},
		Configure: l.configure,
		Families:  []*plugin.Family{family},
	}
}

func (l *library) configure(ctx context.Context, req *plugin.ConfigureRequest) error {
	var c config
	if err := req.Decode(&c); err != nil {
		return err
	}
	dir := ""
	if c.Dir != nil {
		if *c.Dir == "" {
			return &plugin.ConfigError{Path: []string{"dir"}, Summary: "Invalid prompt store directory", Detail: "dir must not be empty; leave it out for the default"}
		}
		dir = *c.Dir
	}
	cacheBytes := int64(defaultCacheBytes)
	if c.CacheBytes != nil {
		n := *c.CacheBytes
		if n < 0 || n > maxCacheBytes || n != float64(int64(n)) {
			return &plugin.ConfigError{Path: []string{"cache_bytes"}, Summary: "Invalid cache size", Detail: fmt.Sprintf("cache_bytes must be a whole number from 0 to %d, got %v", int64(maxCacheBytes), n)}
		}
		cacheBytes = int64(n)
	}
	b, err := openBackend(ctx, req, dir)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.store
	l.store, l.versions = b, newVersionCache(cacheBytes)
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// openBackend opens the store the host's storage settings choose: the
// file store under the state directory (embedded), or the plugin's schema
// of the shared database (postgres), where dir has no meaning.
func openBackend(ctx context.Context, req *plugin.ConfigureRequest, dir string) (store.Backend, error) {
	if req.Storage.Backend == plugin.StoragePostgres {
		if dir != "" {
			req.Warn([]string{"dir"}, "dir is not used", "the host's storage backend is postgres: the prompts are kept in the database, not in a directory")
		}
		pool, err := pgstore.Open(ctx, req.Storage, req.Storage.Schema, store.Migrations())
		if err != nil {
			// While the database is out of reach the host waits and
			// configures the plugin again.
			return nil, fmt.Errorf("open the prompt store: %w", pgstore.ConfigureError(err))
		}
		return store.NewPostgres(pool, req.Storage.Schema), nil
	}
	s, err := store.Open(store.ConfigDir(req.StateDir, dir))
	if err != nil {
		return nil, &plugin.ConfigError{Path: []string{"dir"}, Summary: "Cannot open the prompt store", Detail: err.Error()}
	}
	return store.Files(s), nil
}

// get answers one pinned reference. A bare name never reaches a plugin
// through the host, which resolves it through the calling pack's lock map
// first; one that does is refused like any other unpinned form.
// Get implements promptlibrary.Server.
func (l *library) Get(ctx context.Context, _ *plugin.Request, in *promptlibrary.GetRequest) (*promptlibrary.Prompt, error) {
	pin, err := promptlibrary.ParsePin(in.PromptID)
	if err != nil {
		return nil, wop.Errorf(promptlibrary.CodePromptUnpinned, "%v", err).
			WithDetails(map[string]string{"promptId": in.PromptID})
	}
	st, cache := l.backend()
	v, raw, hit := cache.get(pin)
	if !hit {
		v, raw, err = st.Get(ctx, pin)
		if err != nil {
			return nil, storeError(in.PromptID, err)
		}
	}
	f, err := l.parse(v.Digest, raw)
	if err != nil {
		// The bytes hash to their digest but do not parse: the parser
		// changed underneath a published version, an integrity problem.
		return nil, wop.Errorf(promptlibrary.CodePromptDigestMismatch, "%s: stored bytes no longer parse: %v", pin, err).
			WithDetails(map[string]string{"promptId": in.PromptID})
	}
	if !hit {
		cache.put(v, raw)
	}
	return f.Answer(in.PromptID, v.Name, v.Version, v.Digest, raw), nil
}

// current returns the store opened at Configure.
func (l *library) current() store.Backend {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.store
}

// backend returns the store opened at Configure and its version cache,
// together, so that what one store returned is never cached for another.
func (l *library) backend() (store.Backend, *versionCache) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.store, l.versions
}

// parse returns the parsed form of raw, whose digest the store has just
// verified.
func (l *library) parse(digest string, raw []byte) (*promptfile.File, error) {
	l.mu.RLock()
	f, ok := l.parsed[digest]
	l.mu.RUnlock()
	if ok {
		return f, nil
	}
	f, err := promptfile.Parse(raw)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if len(l.parsed) >= parsedCacheSize {
		clear(l.parsed)
	}
	l.parsed[digest] = f
	l.mu.Unlock()
	return f, nil
}

// storeError maps a store failure to the family's code. promptID, when
// set, names the prompt concerned in the details.
func storeError(promptID string, err error) error {
	var details map[string]string
	if promptID != "" {
		details = map[string]string{"promptId": promptID}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return wop.Errorf(promptlibrary.CodePromptNotFound, "%v", err).WithDetails(details)
	case errors.Is(err, store.ErrVersionNotFound):
		return wop.Errorf(promptlibrary.CodePromptVersionNotFound, "%v", err).WithDetails(details)
	case errors.Is(err, store.ErrDigestMismatch), errors.Is(err, store.ErrCorrupt):
		return wop.Errorf(promptlibrary.CodePromptDigestMismatch, "%v", err).WithDetails(details)
	case errors.Is(err, store.ErrVersionExists):
		return wop.Errorf(promptlibrary.CodePromptVersionConflict, "%v", err).WithDetails(details)
	case errors.Is(err, store.ErrInvalid):
		return wop.Errorf(promptlibrary.CodePromptInvalid, "%v", err).WithDetails(details)
	case pgstore.Unavailable(err):
		return wop.Errorf(wop.CodeUnavailable, "%v", err).WithRetryable(true).WithDetails(details)
	default:
		return wop.Errorf(promptlibrary.CodePromptStoreUnavailable, "%v", err).WithRetryable(true).WithDetails(details)
	}
}
