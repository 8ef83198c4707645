package wire

import "strings"

// BaseEnv returns the entries of environ ("NAME=value", as os.Environ
// gives them) that every process the host starts may see: PATH, HOME,
// TMPDIR, TZ and the locale (LANG, LANGUAGE and every LC_*). Nothing else
// of the host's environment reaches a plugin, a pack or an MCP server: the
// host's own environment holds the API's bearer token and every secret its
// config reads with env(), and a third-party binary must not read them
// from its own. A process gets more only when the operator passes it by
// name (the env attribute of its block). The order of environ is kept.
func BaseEnv(environ []string) []string {
	out := make([]string, 0, 8)
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && IsBaseEnv(name) {
			out = append(out, kv)
		}
	}
	return out
}

// IsBaseEnv reports whether the variable name belongs to the base set
// BaseEnv keeps.
func IsBaseEnv(name string) bool {
	switch name {
	case "PATH", "HOME", "TMPDIR", "TZ", "LANG", "LANGUAGE":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// IsReservedEnv reports whether the variable name is one the host sets
// itself for the plugin protocol, which an operator may therefore not
// pass: the WOPHOST_ variables (log level, message limit, plugin name, the
// TLS descriptor, the handshake cookie, tracing, the sandbox's grant) and
// go-plugin's PLUGIN_ ones (ports, protocol versions, the client
// certificate). An operator who could set WOPHOST_SANDBOX would make an
// uncontained process report its failures as the sandbox's.
func IsReservedEnv(name string) bool {
	return strings.HasPrefix(name, "WOPHOST_") || strings.HasPrefix(name, "PLUGIN_")
}
