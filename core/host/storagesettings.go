package host

import (
	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/sdk/plugin"
)

// storageFor is the storage settings the host gives capability block cc's
// plugin at Configure: the host's storage block, and a schema of the
// plugin's own derived from the block's name.
func (h *Host) storageFor(cc *config.Capability) plugin.Storage {
	s := h.cfg.Host.Storage
	return plugin.Storage{
		Backend:          s.Backend,
		DSN:              s.DSN,
		MaxConnections:   s.MaxConnections,
		StatementTimeout: s.StatementTimeout,
		Schema:           config.StorageSchema(cc.Name),
	}
}
