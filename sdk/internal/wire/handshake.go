package wire

import (
	"os"
	"strconv"

	goplugin "github.com/hashicorp/go-plugin"
)

// ProtocolVersion is the major version of the wophost plugin protocol.
const ProtocolVersion = 1

// Plugin kinds in the plugin set. A binary serves one of them.
const (
	KindCapability = "capability"
	KindPack       = "pack"
)

// Environment variables the host sets for every plugin and pack process.
const (
	EnvLogLevel        = "WOPHOST_LOG_LEVEL"
	envMaxMessageBytes = "WOPHOST_MAX_MESSAGE_BYTES"
	EnvPluginName      = "WOPHOST_PLUGIN_NAME"
)

// EnvSandbox is set, only for a process the host runs contained, to the
// runtime requirement tokens its sandbox grants, comma-separated ("" when
// it grants none). Its presence, not its value, says the process is
// contained.
const EnvSandbox = "WOPHOST_SANDBOX"

// DefaultMaxMessageBytes is the message size limit when the host sets none.
const DefaultMaxMessageBytes = 16 << 20

// Handshake is the go-plugin handshake every wophost binary shares. The
// cookie only guards against running a plugin by hand; it is not security.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "WOPHOST_PLUGIN_COOKIE",
	MagicCookieValue: "c0a6f3e2-wophost-plugin-9d51b7",
}

// MaxMessageBytesFromEnv returns the limit the host passed, or the default.
func MaxMessageBytesFromEnv() int {
	n, err := strconv.Atoi(os.Getenv(envMaxMessageBytes))
	if err != nil || n <= 0 {
		return DefaultMaxMessageBytes
	}
	return n
}
