package host

import (
	"errors"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wophost/wophost/core/config"
)

// StorageInfo says where the host keeps its run records and idempotency
// records, and whether that storage takes writes now.
type StorageInfo struct {
	// Backend is config.BackendEmbedded or config.BackendPostgres.
	Backend string `json:"backend"`
	// Where is the state directory, or the database as host:port/dbname,
	// never with its user or password.
	Where string `json:"where"`
	// Writable is whether runs that leave a record are accepted now.
	Writable bool `json:"writable"`
	// Reason says why the storage cannot take writes when Writable is
	// false (StorageError.Reason).
	Reason string `json:"reason,omitempty"`
}

// Storage reports the host's storage and its health, as Ready checks it
// (cached for a second, so it costs no disk or database work per call).
func (h *Host) Storage() StorageInfo {
	info := StorageInfo{Backend: config.BackendEmbedded, Where: h.cfg.Host.StateDir}
	if h.state.postgres() {
		info.Backend, info.Where = config.BackendPostgres, databaseWhere(h.cfg.Host.Storage.DSN)
	}
	err := h.state.health.check()
	info.Writable = err == nil
	var se *StorageError
	switch {
	case errors.As(err, &se):
		info.Reason = se.Reason
	case err != nil:
		info.Reason = err.Error()
	}
	return info
}

// databaseWhere names the database of dsn as host:port/dbname, leaving out
// its user, password and parameters.
func databaseWhere(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(a dsn that cannot be parsed)"
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database
}
