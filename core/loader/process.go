// Package loader starts plugin and pack processes through go-plugin and
// walks a capability through its start-up phases: verify, start,
// negotiate, describe, configure.
package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/wophost/wophost/sdk/tracing"
	"github.com/wophost/wophost/sdk/wire"
)

// Options are the settings every process the host starts shares.
type Options struct {
	Logger          hclog.Logger
	LogLevel        hclog.Level
	MaxMessageBytes int
	StartTimeout    time.Duration
	HostVersion     string
	// Tracing, when set, is handed to every process so that its spans
	// join the host's traces; nil turns tracing off in the children too.
	Tracing *tracing.Settings
}

// PhaseError is a start-up failure in a named lifecycle phase.
type PhaseError struct {
	Phase string
	Err   error
}

// Error implements error.
func (e *PhaseError) Error() string { return e.Phase + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *PhaseError) Unwrap() error { return e.Err }

// ChecksumError is a sha256 pin that does not match the binary.
type ChecksumError struct {
	Path     string
	Expected string
	Actual   string
}

// Error implements error.
func (e *ChecksumError) Error() string {
	return fmt.Sprintf("sha256 of %s does not match the pin: expected %s, actual %s", e.Path, e.Expected, e.Actual)
}

// Verify checks that path is an executable regular file and, when pin is
// set, that its sha256 is pin. It returns the sum it computed, which the
// host also hands to go-plugin so the check is repeated just before exec.
func Verify(path, pin string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("plugin binary %s does not exist", path)
		}
		return nil, fmt.Errorf("plugin binary %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("plugin binary %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("plugin binary %s is not executable (mode %s)", path, fi.Mode().Perm())
	}
	if pin == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open plugin binary %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("hash plugin binary %s: %w", path, err)
	}
	sum := h.Sum(nil)
	if actual := hex.EncodeToString(sum); actual != pin {
		return nil, &ChecksumError{Path: path, Expected: pin, Actual: actual}
	}
	return sum, nil
}

// processEnv is the environment of a child: the host's, with the
// tracing settings of this host rather than any inherited ones.
func processEnv(name string, opts Options) []string {
	env := slices.DeleteFunc(wire.ProcessEnv(name, opts.LogLevel, opts.MaxMessageBytes), func(kv string) bool {
		return strings.HasPrefix(kv, "WOPHOST_OTLP_")
	})
	if opts.Tracing != nil {
		env = append(env, opts.Tracing.Env()...)
	}
	return env
}

// process is one running plugin or pack binary.
type process struct {
	name   string
	client *goplugin.Client
	logger hclog.Logger
}

// startProcess execs path and completes the go-plugin handshake.
func startProcess(name, path string, sum []byte, opts Options) (*process, goplugin.ClientProtocol, error) {
	logger := opts.Logger.Named(name)
	cmd := exec.Command(path)
	cmd.Dir = filepath.Dir(path)
	cmd.Env = processEnv(name, opts)
	// A process group of its own keeps a terminal's Ctrl-C away from the
	// plugin (the host decides when it stops) and lets the host kill the
	// plugin's children with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cfg, started, err := wire.ClientConfig(cmd, logger, opts.StartTimeout, opts.MaxMessageBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("launch %s: %w", name, err)
	}
	cfg.PluginLogBufferSize = 256 << 10
	cfg.SyncStdout = logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})
	cfg.SyncStderr = logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})
	if sum != nil {
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	client := goplugin.NewClient(cfg)
	p := &process{name: name, client: client, logger: logger}
	rpc, err := client.Client()
	started()
	if err != nil {
		p.kill()
		return nil, nil, err
	}
	return p, rpc, nil
}

// kill stops the process and anything left in its process group.
func (p *process) kill() {
	pid := 0
	if rc := p.client.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	p.client.Kill()
	if pid > 0 {
		// The group may already be gone; ESRCH is the common answer.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// Exited reports whether the process has exited.
func (p *process) exited() bool { return p.client.Exited() }

// FileIdentity names the file at path as it is now: device, inode, size
// and modification times. A rebuilt or replaced binary gets another
// identity, so a reload can tell whether a running plugin still runs the
// binary its block names without hashing it.
func FileIdentity(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}
