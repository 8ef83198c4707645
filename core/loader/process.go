// Package loader starts plugin and pack processes through go-plugin and
// walks a capability through its start-up phases: verify, start,
// negotiate, describe, configure.
package loader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/wophost/wophost/core/sandbox"
	"github.com/wophost/wophost/internal/procgroup"
	"github.com/wophost/wophost/sdk/hostwire"
	"github.com/wophost/wophost/sdk/tracing"
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
	// GoMaxProcs, when above 0, is the GOMAXPROCS the process starts
	// with, unless Env sets GOMAXPROCS itself.
	GoMaxProcs int
	// Env holds the variables the operator passes to this process (the
	// env attribute of its block), on top of the base set every process
	// gets (hostwire.ProcessEnv). Values may be secrets: they are never
	// logged.
	Env map[string]string
	// DirectChannels lets a plugin that offers a direct channel serve one
	// (the host block's direct_channels): packs call it under the host's
	// grants, and the host relays its own calls to the plugin on it.
	DirectChannels bool
	// MaxConcurrentCalls is the capability block's max_concurrent_calls,
	// which a plugin's direct channel applies to the calls it takes.
	MaxConcurrentCalls int
	// DirectMaxUnreadBytes is the host block's direct_max_unread_bytes,
	// which a plugin's direct channel holds its callers' unread answers
	// to.
	DirectMaxUnreadBytes int
	// Contain, when set, starts the process contained (package sandbox).
	Contain *Containment
}

// Containment is how one process is contained.
type Containment struct {
	// Support is what the kernel can enforce (sandbox.Probe).
	Support *sandbox.Support
	// Launcher is the host binary, which confines the process and execs
	// its entry (sandbox.IsLaunch).
	Launcher string
	// Policy is what the operator allows the process.
	Policy sandbox.Policy
	// Declared lists the requirements the process declared.
	Declared []string
	// Dir is the process's directory, readable and executable: the pack
	// directory.
	Dir string
	// StateDir is the process's own directory for state, made if missing.
	StateDir string
}

// ExitError is a process that exited before it was ready: before it
// completed its handshake, or during a start-up call (Describe,
// ConfigSchema, Configure, a pack's Manifest). Its text is what the
// process wrote last to stderr when it wrote anything, in place of
// go-plugin's guesses or the lost connection.
type ExitError = hostwire.ExitError

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
	// AtExec is set when the binary matched when the host hashed it and
	// no longer did when go-plugin hashed it again, just before exec: the
	// file was replaced in between.
	AtExec bool
}

// Error implements error.
func (e *ChecksumError) Error() string {
	when := ""
	if e.AtExec {
		when = " just before exec (the file changed after the host checked it)"
	}
	return fmt.Sprintf("sha256 of %s does not match the pin%s: expected %s, actual %s", e.Path, when, e.Expected, e.Actual)
}

// sumRecorder is the hash go-plugin checks a pinned binary with just
// before exec. It keeps the sum go-plugin computed, since go-plugin's own
// error ("checksums did not match") names neither sum.
type sumRecorder struct {
	hash.Hash
	sum []byte
}

// Sum implements hash.Hash, remembering the sum.
func (r *sumRecorder) Sum(b []byte) []byte {
	out := r.Hash.Sum(b)
	r.sum = slices.Clone(out[len(b):])
	return out
}

// goMaxProcsVar is the Go runtime's variable for its number of
// scheduler threads.
const goMaxProcsVar = "GOMAXPROCS"

// processEnv is the environment of a child: the base set of the host's
// environment and the protocol's variables (hostwire.ProcessEnv), the
// operator's variables for this process, its GOMAXPROCS unless those set
// one, and this host's tracing settings. The config refuses operator
// variables of the protocol's names (hostwire.IsReservedEnv), so none of
// them shadows the host's.
func processEnv(name string, opts Options) []string {
	env := hostwire.ProcessEnv(name, opts.LogLevel, opts.MaxMessageBytes)
	// Sorted, so that a process's environment does not change from one
	// start to the next.
	for _, k := range slices.Sorted(maps.Keys(opts.Env)) {
		env = append(env, k+"="+opts.Env[k])
	}
	if _, set := opts.Env[goMaxProcsVar]; !set && opts.GoMaxProcs > 0 {
		env = append(env, goMaxProcsVar+"="+strconv.Itoa(opts.GoMaxProcs))
	}
	if opts.Tracing != nil {
		env = append(env, opts.Tracing.Env()...)
	}
	return env
}

// Bounds of starting and stopping a process, beyond its start_timeout.
const (
	// startGrace is how long past start_timeout a start may run before
	// the host kills the process group itself: go-plugin's own timeout
	// covers the wait for the handshake line, not the connection set up
	// after it.
	startGrace = 500 * time.Millisecond
	// exitGrace is how long a stop waits for the process to exit once
	// asked to, before it kills the group. go-plugin waits 2 s and then
	// kills the leader, and on Linux the group follows the leader at
	// once; the bound matters only where the leader's exit is not seen.
	exitGrace = 3 * time.Second
	// releaseGrace is how long, once the group is dead, the host waits
	// for go-plugin to see the process's stdout and stderr close. Only a
	// descendant that left the group can still hold them; the host then
	// stops waiting, and go-plugin's readers end when that process does.
	releaseGrace = 500 * time.Millisecond
)

// process is one running plugin or pack binary, the leader of a process
// group of its own.
type process struct {
	name   string
	client *goplugin.Client
	logger hclog.Logger
	// group is nil when the binary never started.
	group *procgroup.Group
	// cancel ends exec's watch of the command, killing the group if
	// go-plugin has not yet collected the process.
	cancel   context.CancelFunc
	killOnce sync.Once
	// socket is the unix socket the process announced in its handshake.
	// go-plugin's server removes it when it closes its listener, which a
	// process killed with SIGKILL never does; the host removes it once the
	// process is gone.
	socket string
	// direct is the directory of the process's direct-channel socket
	// (directDir), "" until one was made.
	directMu sync.Mutex
	direct   string
	// words keeps the end of the process's stderr.
	words *hostwire.LastWords
	// cmd is the command go-plugin runs; its ProcessState is go-plugin's
	// to write until collected is closed or the process's connection says
	// it exited.
	cmd *exec.Cmd
	// collected is closed once a stop has seen go-plugin let go of the
	// process: it has been waited for and its output read to the end.
	collected chan struct{}
	// contained is the process's containment, nil when it runs
	// uncontained.
	contained *sandbox.Process
}

// startOutcome is what go-plugin's start returned.
type startOutcome struct {
	rpc   goplugin.ClientProtocol
	err   error
	group *procgroup.Group
}

// startProcess execs the opened binary exe and completes the go-plugin
// handshake. It closes exe once the process has started, or failed to. It
// returns within start_timeout plus startGrace and releaseGrace however the
// process and its descendants behave.
func startProcess(name string, exe *Executable, opts Options) (*process, goplugin.ClientProtocol, error) {
	logger := opts.Logger.Named(name)
	// go-plugin starts the command inside Start, where the host cannot
	// read its pid without a race; exec's Cancel runs after the start
	// with the pid set, so cancelling the context kills the group even
	// while go-plugin is still waiting.
	ctx, cancel := context.WithCancel(context.Background())
	// The process is started from the open file the checks ran on, not
	// from its path (see Executable); argv[0] and the working directory
	// are still the binary's as named.
	cmd := exec.CommandContext(ctx, exe.execPath())
	cmd.Args[0] = exe.path
	cmd.Dir = filepath.Dir(exe.path)
	cmd.Env = processEnv(name, opts)
	var contained *sandbox.Process
	if c := opts.Contain; c != nil {
		var err error
		contained, err = c.Support.Prepare(name, c.Policy, c.Declared, c.Dir, c.StateDir, exe.file, hex.EncodeToString(exe.sum))
		if err != nil {
			cancel()
			exe.Close()
			return nil, nil, fmt.Errorf("contain %s: %w", name, err)
		}
		if !contained.Grants().Env {
			// Without env.read the process gets the protocol's variables
			// and the operator's, none of the host's own.
			cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool {
				k, _, _ := strings.Cut(kv, "=")
				return hostwire.IsBaseEnv(k) && opts.Env[k] == ""
			})
		}
	}
	// A process group of its own keeps a terminal's Ctrl-C away from the
	// process (the host decides when it stops) and lets the host end
	// whatever the process spawned with it.
	launch := procgroup.Prepare(cmd)
	cmd.Cancel = func() error { return procgroup.Kill(cmd.Process.Pid) }
	cfg, started, err := hostwire.ClientConfig(cmd, logger, opts.StartTimeout, opts.MaxMessageBytes)
	if err == nil && contained != nil {
		// After ClientConfig: the entry's descriptor follows the ones it
		// attached.
		err = contained.Wrap(cmd, opts.Contain.Launcher, exe.file)
		if g := contained.SocketGroup(); g != "" {
			// The process runs as another user: the host's sockets for it
			// are open to its group.
			cfg.UnixSocketConfig = &goplugin.UnixSocketConfig{Group: g}
		}
	}
	if err != nil {
		cancel()
		exe.Close()
		if contained != nil {
			contained.Close()
		}
		return nil, nil, fmt.Errorf("launch %s: %w", name, err)
	}
	cfg.PluginLogBufferSize = 256 << 10
	// After Wrap, which may make the launcher the command.
	cfg.Logger = stderrLogger{Logger: logger, base: filepath.Base(cmd.Path)}
	cfg.SyncStdout = logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})
	// go-plugin copies every line the process writes to its stderr (a
	// panic's too) to Stderr before it logs it; what the process writes
	// to os.Stderr, which the SDKs point at a pipe, comes to SyncStderr.
	words := &hostwire.LastWords{}
	cfg.Stderr = words
	cfg.SyncStderr = io.MultiWriter(logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}), words)
	var recorder *sumRecorder
	if exe.sum != nil && contained == nil {
		// A contained process's launcher checks the sum itself, on the
		// open file, just before exec.
		// go-plugin hashes the file at the command's path once more just
		// before exec: the same open file, through /proc.
		recorder = &sumRecorder{Hash: sha256.New()}
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: exe.sum, Hash: recorder}
	}
	client := goplugin.NewClient(cfg)
	p := &process{name: name, client: client, logger: logger, cancel: cancel, words: words, cmd: cmd, collected: make(chan struct{}), contained: contained}

	t0 := time.Now()
	done := make(chan startOutcome, 1)
	go func() {
		rpc, err := client.Client()
		started()
		// The process has been exec'd (or never will be): the binary's
		// descriptor is no longer needed.
		exe.Close()
		// This goroutine started the command: cmd.Process is its to read.
		done <- startOutcome{rpc: rpc, err: err, group: launch.Started()}
	}()
	deadline := time.NewTimer(opts.StartTimeout + startGrace)
	defer deadline.Stop()
	var out startOutcome
	select {
	case out = <-done:
	case <-deadline.C:
		// go-plugin is past its own timeout, setting up the connection
		// with its client lock held, which no exit of the process ends.
		// Kill the group and stop the process once go-plugin gives up.
		cancel()
		go func() {
			o := <-done
			p.group = o.group
			p.noteSocket()
			p.stop(false)
		}()
		return nil, nil, fmt.Errorf("%s did not complete its handshake and connection within start_timeout (%s)", name, opts.StartTimeout)
	}
	p.group = out.group
	p.noteSocket()
	if out.err != nil {
		p.stop(false)
		// Read after the start returned, which is after go-plugin hashed.
		if recorder != nil && recorder.sum != nil && errors.Is(out.err, goplugin.ErrChecksumsDoNotMatch) {
			return nil, nil, &ChecksumError{Path: exe.path, Expected: hex.EncodeToString(exe.sum), Actual: hex.EncodeToString(recorder.sum), AtExec: true}
		}
		if actual, ok := sandbox.ChecksumMismatch(words.String()); ok {
			return nil, nil, &ChecksumError{Path: exe.path, Expected: hex.EncodeToString(exe.sum), Actual: actual, AtExec: true}
		}
		if said, ok := sandbox.LaunchFailure(words.String()); ok {
			return nil, nil, fmt.Errorf("the launcher could not contain %s: %s", name, said)
		}
		if took := time.Since(t0); took >= opts.StartTimeout {
			return nil, nil, fmt.Errorf("%s did not complete its handshake within start_timeout (%s): %w", name, opts.StartTimeout, out.err)
		}
		return nil, nil, hostwire.StartFailure(out.err, p.state(), words.String())
	}
	return p, out.rpc, nil
}

// noteSocket records the unix socket the process announced, if it got as
// far as its handshake. Call it once go-plugin's start has returned.
func (p *process) noteSocket() {
	if rc := p.client.ReattachConfig(); rc != nil && rc.Addr != nil && rc.Addr.Network() == "unix" {
		p.socket = rc.Addr.String()
	}
}

// kill stops the process gracefully, then anything left in its process
// group. It returns within exitGrace plus releaseGrace.
func (p *process) kill() { p.stop(true) }

// stop ends the process and its group. A graceful stop lets go-plugin ask
// the process to exit first; otherwise the group is killed at once.
func (p *process) stop(graceful bool) {
	p.killOnce.Do(func() {
		stopped := p.collected
		if graceful {
			go func() {
				p.client.Kill()
				close(stopped)
			}()
			var leaderExited <-chan struct{}
			if p.group != nil {
				leaderExited = p.group.LeaderExited()
			}
			grace := time.NewTimer(exitGrace)
			// go-plugin's Kill returns only once the process's output has
			// closed, which a child holding it puts off: the leader's exit
			// is what ends the wait.
			select {
			case <-stopped:
			case <-leaderExited:
			case <-grace.C:
			}
			grace.Stop()
		}
		if p.group != nil {
			if err := p.group.Kill(); err != nil {
				p.logger.Warn("could not kill the process group", "error", err)
			}
		}
		if graceful {
			// With the group gone the output closes and go-plugin collects
			// the process on its own; cancelling exec's watch first would
			// have a stop the host asked for reported as a failure
			// ("context canceled").
			settle := time.NewTimer(releaseGrace)
			select {
			case <-stopped:
			case <-settle.C:
			}
			settle.Stop()
		}
		p.cancel()
		if !graceful {
			go func() {
				p.client.Kill()
				close(stopped)
			}()
		}
		release := time.NewTimer(releaseGrace)
		select {
		case <-stopped:
		case <-release.C:
			p.logger.Warn("a process that left its process group still holds the plugin's output; the host stops waiting for it")
		}
		release.Stop()
		if p.group != nil {
			p.group.Release()
		}
		p.removeSocket()
		if p.direct != "" {
			_ = os.RemoveAll(p.direct)
		}
		if p.contained != nil {
			p.contained.Close()
		}
	})
}

// stateDirFor is the state directory dir as the process reaches it: the
// path its containment gave it (a descriptor's, for a process run as
// another user, which may not walk the host's state_dir), else dir.
func (p *process) stateDirFor(dir string) string {
	if p.contained != nil {
		if seen := p.contained.StateDir(); seen != "" {
			return seen
		}
	}
	return dir
}

// memoryBreach reports whether the process, contained, was killed for its
// memory cap, and the cap.
func (p *process) memoryBreach() (limit int64, exceeded bool) {
	if p.contained == nil {
		return 0, false
	}
	return p.contained.MemoryLimit(), p.contained.MemoryExceeded()
}

// directDir returns the private directory in which the process makes its
// direct channel's socket, made on first use and removed when the process
// stops (for a contained process, its private temporary directory). It is short, under the system's temporary directory, since a
// unix socket's path is bounded (108 bytes on Linux).
func (p *process) directDir() (string, error) {
	if p.contained != nil {
		// A contained process may make a file, a socket among them, only
		// in its own directories (Landlock): a directory of the host's
		// would refuse its bind, and the channel would be lost. Its
		// private temporary directory is as private (mode 0700, its own
		// user's) and is removed with it.
		if dir := p.contained.TempDir(); dir != "" {
			return dir, nil
		}
		return "", fmt.Errorf("direct channel directory: %s has stopped", p.name)
	}
	p.directMu.Lock()
	defer p.directMu.Unlock()
	if p.direct == "" {
		dir, err := os.MkdirTemp("", "wophost-dc-")
		if err != nil {
			return "", fmt.Errorf("direct channel directory: %w", err)
		}
		p.direct = dir
	}
	return p.direct, nil
}

// removeSocket removes the socket the stopped process listened on, if it
// is still there. Only a socket is removed: the path comes from the
// process's handshake, and whatever else may sit there is not the host's.
func (p *process) removeSocket() {
	if p.socket == "" {
		return
	}
	fi, err := os.Lstat(p.socket)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		return
	}
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.logger.Warn("could not remove the stopped process's socket", "path", p.socket, "error", err)
	}
}

// Exited reports whether the process has exited.
func (p *process) exited() bool { return p.client.Exited() }

// lastWords is the end of what the process wrote to stderr, on one line;
// "" when it wrote nothing.
func (p *process) lastWords() string { return p.words.String() }

// state is how the process ended, once a stop has seen go-plugin collect
// it; nil before, or when it never started.
func (p *process) state() *os.ProcessState {
	select {
	case <-p.collected:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// callError is the error of the start-up call named call that failed
// with err, exited being closed once the process has exited: a
// *hostwire.ExitError when the connection failed because the process
// exited, otherwise the call's error.
func (p *process) callError(call string, exited <-chan struct{}, err error) error {
	return hostwire.ExitedDuring(call, err, exited, p.cmd, p.words)
}

// pid is the process's id, or 0 when it never started.
func (p *process) pid() int {
	if p.group == nil {
		return 0
	}
	return p.group.PID()
}

// FileIdentity names the file at path as it is now: device, inode, size
// and modification times. A rebuilt or replaced binary gets another
// identity, so a reload can tell whether a running plugin still runs the
// binary its block names without hashing it.
func FileIdentity(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	return statIdentity(&st), nil
}

// stderrLogger is the logger go-plugin is given for a process. go-plugin
// logs what the process writes to stderr under its logger named after the
// base name of the command's path, which for the host is a descriptor
// (/proc/self/fd/N) or the launcher: Named with that name returns the
// process's own logger, so that its lines come out under the name of its
// capability or pack.
type stderrLogger struct {
	hclog.Logger
	// base is the base name of the command's path.
	base string
}

// Named implements hclog.Logger.
func (l stderrLogger) Named(name string) hclog.Logger {
	if name == l.base {
		return l.Logger
	}
	return l.Logger.Named(name)
}
