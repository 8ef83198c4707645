package host

func (h *Host) isPure(family, method string) bool {
	switch family + "." + method {
	case "promptLibrary.get", "mcp.listTools", "mcp.readResource", "mcp.serverHealth", "acme.kv.get":
		return true
	}
	return false
}
