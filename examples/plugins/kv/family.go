package main

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"unicode/utf8"

	"github.com/wophost/wophost/examples/plugins/kv/kvapi"
	"github.com/wophost/wophost/sdk/plugin"
	"github.com/wophost/wophost/sdk/schema"
	"github.com/wophost/wophost/sdk/wop"
)

// config is the plugin's config block.
type config struct {
	File          *string `json:"file"`
	MaxValueBytes *int    `json:"max_value_bytes"`
}

// kv serves the acme.kv family from a store opened at Configure.
type kv struct {
	mu       sync.RWMutex
	store    *store
	maxValue int
}

func newPlugin() *plugin.Plugin {
	k := &kv{}
	return &plugin.Plugin{
		Name:    "wophost-kv",
		Version: "0.1.0",
		ConfigSchema: schema.Block{Attributes: []schema.Attribute{
			{Name: "file", Type: schema.String, Description: `store file, relative to the plugin's state directory (default "kv.db")`},
			{Name: "max_value_bytes", Type: schema.Number, Description: "largest value accepted by put (default 65536)"},
		}},
		Configure:    k.configure,
		Shutdown:     k.shutdown,
		SingleWriter: true,
		Families: []*plugin.Family{{
			Name:    kvapi.Family,
			Status:  "experimental",
			Since:   "2.0",
			Until:   "2027-06-30",
			Witness: "claims-check",
			Methods: map[string]plugin.Handler{
				kvapi.MethodGet:    plugin.Typed(k.get),
				kvapi.MethodPut:    plugin.Typed(k.put),
				kvapi.MethodDelete: plugin.Typed(k.delete),
			},
			// get reads and changes nothing, so a replay runs it live and
			// compares; put and delete are answered from the run's log.
			Pure:  []string{kvapi.MethodGet},
			Codes: []string{kvapi.CodeKeyNotFound, kvapi.CodeValueTooLarge, kvapi.CodeStoreUnavailable},
		}},
	}
}

func (k *kv) configure(_ context.Context, req *plugin.ConfigureRequest) error {
	var c config
	if err := req.Decode(&c); err != nil {
		return err
	}
	file := "kv.db"
	if c.File != nil {
		file = *c.File
	}
	if file == "" || filepath.IsAbs(file) || !filepath.IsLocal(file) {
		return &plugin.ConfigError{Path: []string{"file"}, Summary: "Invalid store file", Detail: "file must be a relative path inside the plugin's state directory"}
	}
	maxValue := 64 << 10
	if c.MaxValueBytes != nil {
		if *c.MaxValueBytes < 1 {
			return &plugin.ConfigError{Path: []string{"max_value_bytes"}, Summary: "Invalid max_value_bytes", Detail: "it must be at least 1"}
		}
		maxValue = *c.MaxValueBytes
	}
	s, err := openStore(filepath.Join(req.StateDir, file))
	if err != nil {
		return wop.Errorf(kvapi.CodeStoreUnavailable, "%v", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.store != nil {
		_ = k.store.close()
	}
	k.store, k.maxValue = s, maxValue
	return nil
}

func (k *kv) shutdown() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.store != nil {
		_ = k.store.close()
		k.store = nil
	}
}

func checkKey(key string) error {
	if key == "" {
		return wop.Errorf(wop.CodeValidation, "field \"key\": must not be empty")
	}
	if len(key) > 1024 || !utf8.ValidString(key) {
		return wop.Errorf(wop.CodeValidation, "field \"key\": must be valid UTF-8 of at most 1024 bytes")
	}
	return nil
}

func (k *kv) get(_ context.Context, _ *plugin.Request, in *kvapi.GetRequest) (*kvapi.GetResult, error) {
	if err := checkKey(in.Key); err != nil {
		return nil, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	v, version, err := k.store.get(in.Key)
	if errors.Is(err, errNotFound) {
		return nil, wop.Errorf(kvapi.CodeKeyNotFound, "no value under key %q", in.Key)
	}
	if err != nil {
		return nil, wop.Errorf(kvapi.CodeStoreUnavailable, "read %q: %v", in.Key, err).WithRetryable(true)
	}
	return &kvapi.GetResult{Key: in.Key, Value: v, Version: version}, nil
}

func (k *kv) put(_ context.Context, _ *plugin.Request, in *kvapi.PutRequest) (*kvapi.PutResult, error) {
	if err := checkKey(in.Key); err != nil {
		return nil, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if len(in.Value) > k.maxValue {
		return nil, wop.Errorf(kvapi.CodeValueTooLarge, "value of %d bytes is over the %d-byte limit", len(in.Value), k.maxValue).
			WithDetails(map[string]int{"size": len(in.Value), "limit": k.maxValue})
	}
	version, err := k.store.put(in.Key, in.Value)
	if err != nil {
		return nil, wop.Errorf(kvapi.CodeStoreUnavailable, "write %q: %v", in.Key, err).WithRetryable(true)
	}
	return &kvapi.PutResult{Key: in.Key, Version: version}, nil
}

func (k *kv) delete(_ context.Context, _ *plugin.Request, in *kvapi.DeleteRequest) (*kvapi.DeleteResult, error) {
	if err := checkKey(in.Key); err != nil {
		return nil, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	existed, err := k.store.delete(in.Key)
	if err != nil {
		return nil, wop.Errorf(kvapi.CodeStoreUnavailable, "delete %q: %v", in.Key, err).WithRetryable(true)
	}
	return &kvapi.DeleteResult{Key: in.Key, Deleted: existed}, nil
}
