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
// base set of the host's own (BaseEnv), plus the settings the SDKs read at
// start-up. ClientConfig adds the TLS descriptor and go-plugin its
// handshake variables; nothing else of the host's environment is passed.
func ProcessEnv(name string, level hclog.Level, maxBytes int) []string {
	return append(BaseEnv(os.Environ()),
		EnvLogLevel+"="+level.String(),
		envMaxMessageBytes+"="+strconv.Itoa(maxBytes),
		EnvPluginName+"="+name,
	)
}

// ClientConfig is the go-plugin client configuration every wophost process
// is started with: gRPC only, mutual TLS from a launchTLS attached to cmd,
// the shared handshake and plugin set, and the message size limit on the
// dialling side. Callers add what is theirs (a checksum pin, log sinks),
// and call started once the client has started the process or failed to.
func ClientConfig(cmd *exec.Cmd, logger hclog.Logger, startTimeout time.Duration, maxBytes int) (cfg *goplugin.ClientConfig, started func(), err error) {
	launch, err := newLaunchTLS()
	if err != nil {
		return nil, nil, err
	}
	started, err = launch.attach(cmd)
	if err != nil {
		return nil, nil, err
	}
	return &goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: hostPluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		// go-plugin's AutoMTLS would generate P-521 keys on both sides;
		// the launch's own TLS replaces it, and a plugin that answers
		// with an AutoMTLS certificate is still accepted (see launchTLS).
		TLSConfig:       launch.host,
		Logger:          logger,
		StartTimeout:    startTimeout,
		GRPCDialOptions: dialOptions(maxBytes),
		// go-plugin would append the host's whole environment to the
		// command's, API token and secrets included: the process gets
		// what cmd.Env holds (see ProcessEnv) and go-plugin's own
		// handshake variables, nothing else.
		SkipHostEnv: true,
	}, started, nil
}
