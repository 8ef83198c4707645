package host

import "github.com/wophost/wophost/core/dispatch"

func (h *Host) logLimits() dispatch.LogLimits {
	return dispatch.LogLimits{MaxCalls: 10000, MaxBytes: 16 << 20}
}

func (h *Host) isPure(family, method string) bool {
	switch family + "." + method {
	case "promptLibrary.get", "mcp.listTools", "mcp.readResource", "mcp.serverHealth", "acme.kv.get":
		return true
	}
	return false
}
