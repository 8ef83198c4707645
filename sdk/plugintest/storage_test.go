package plugintest

import (
	"context"
	"testing"
	"time"

	"github.com/wophost/wophost/sdk/plugin"
)

// The storage settings of Config reach the plugin's Configure whole, and
// a Config without them gives the embedded backend and the kit's schema.
func TestStorageReachesConfigure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		give, got plugin.Storage
	}{
		{"postgres", plugin.Storage{Backend: plugin.StoragePostgres, DSN: "postgres://kit@127.0.0.1:5432/x", MaxConnections: 3,
			StatementTimeout: 1500 * time.Millisecond, Schema: "wophost_kv"},
			plugin.Storage{Backend: plugin.StoragePostgres, DSN: "postgres://kit@127.0.0.1:5432/x", MaxConnections: 3,
				StatementTimeout: 1500 * time.Millisecond, Schema: "wophost_kv"}},
		{"defaults", plugin.Storage{}, plugin.Storage{Backend: plugin.StorageEmbedded, Schema: "wophost_plugintest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen plugin.Storage
			p := inProcessPlugin()
			p.Configure = func(_ context.Context, req *plugin.ConfigureRequest) error {
				seen = req.Storage
				return nil
			}
			Start(t, Config{InProcess: p, Storage: tc.give}).Configure(t, nil)
			if seen != tc.got {
				t.Fatalf("Configure got %#v (dsn %q), want %#v", seen, seen.DSN, tc.got)
			}
		})
	}
}
