package wire

import (
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
)

// ProcessEnv is the environment a plugin or pack process starts with: the
// host's own, plus the settings the SDKs read at start-up.
func ProcessEnv(name string, level hclog.Level, maxBytes int) []string {
	return append(os.Environ(),
		EnvLogLevel+"="+level.String(),
		EnvMaxMessageBytes+"="+strconv.Itoa(maxBytes),
		EnvPluginName+"="+name,
	)
}

// ClientConfig is the go-plugin client configuration every wophost process
// is started with: gRPC only, AutoMTLS on, the shared handshake and plugin
// set, and the message size limit on the dialling side. Callers add what
// is theirs (a checksum pin, log sinks).
func ClientConfig(cmd *exec.Cmd, logger hclog.Logger, startTimeout time.Duration, maxBytes int) *goplugin.ClientConfig {
	return &goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: HostPluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           logger,
		StartTimeout:     startTimeout,
		GRPCDialOptions:  DialOptions(maxBytes),
	}
}
