package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/host"
)

// exitError carries an exit code out of a command after its output has
// been written.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// failure is an error a command reports on stderr before it exits 1: the
// command was given rightly and failed (a port in use, say). Any other
// error is taken for a usage error and exits 2.
type failure struct{ err error }

func (f *failure) Error() string { return f.err.Error() }

func (f *failure) Unwrap() error { return f.err }

// globals are the flags every command shares.
type globals struct {
	configPath string
	json       bool
	logLevel   string
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	// startProcs is GOMAXPROCS as the process started (Go's default or
	// the GOMAXPROCS environment variable), restored when a reloaded
	// config no longer sets gomaxprocs.
	startProcs int
	// sdkVersion is the version of the SDK the host was built with, ""
	// in a development build (see the package variable).
	sdkVersion string
}

func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr, startProcs: runtime.GOMAXPROCS(0), sdkVersion: sdkVersion}
	root := &cobra.Command{
		Use:           "host",
		Short:         "wophost: a host for node packs and out-of-process capability plugins",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.configPath, "config", "./host.hcl", "path of the host config file")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "log level of the host and of the plugins and packs it starts: trace, debug, info, warn, error or off (default: the config's log_level)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.logLevel != "" && !config.IsLogLevel(g.logLevel) {
			return fmt.Errorf("--log-level %q: want one of %s", g.logLevel, config.LogLevels)
		}
		return nil
	}
	root.AddCommand(
		runCommand(g), callCommand(g), capabilitiesCommand(g), validateCommand(g),
		pluginsCommand(g), effectsCommand(g), packsCommand(g), serveCommand(g), promptsCommand(g), agentsCommand(g),
		newCommand(g),
		conformanceCommand(g),
		keysCommand(g),
	)
	err := root.Execute()
	var ee *exitError
	var f *failure
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &f):
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	default:
		fmt.Fprintln(stderr, "Error:", err)
		return 2
	}
}

// readConfig parses the config file. A --log-level given on the command
// line takes the place of the config's log_level, so that it reaches the
// plugins and packs the host starts (in their environment) as well as the
// host's own log: a plugin filters its lines by the level it is given.
func (g *globals) readConfig() (*config.Config, *config.Loader, hcl.Diagnostics) {
	cfg, ldr, diags := config.Load(g.configPath)
	if cfg != nil && g.logLevel != "" {
		cfg.Host.LogLevel = g.logLevel
	}
	return cfg, ldr, diags
}

// loadConfig reads the config and prints every diagnostic of it.
func (g *globals) loadConfig() (*config.Config, *config.Loader, error) {
	cfg, ldr, diags := g.readConfig()
	if len(diags) > 0 {
		if err := config.WriteDiagnostics(g.stderr, ldr.Files(), diags); err != nil {
			return nil, nil, err
		}
	}
	if diags.HasErrors() || cfg == nil {
		return nil, nil, &exitError{code: 1}
	}
	g.applyGoMaxProcs(cfg)
	return cfg, ldr, nil
}

// applyGoMaxProcs sets the host's GOMAXPROCS from the config, or back to
// what the process started with when the config sets none (a reload may
// have removed the setting).
func (g *globals) applyGoMaxProcs(cfg *config.Config) {
	n := cfg.Host.GoMaxProcs
	if n == 0 {
		n = g.startProcs
	}
	// Setting GOMAXPROCS stops the runtime from following CPU limit
	// changes, so leave it alone when nothing changes.
	if n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
}

// logger returns the host's logger at cfg's level, which readConfig set
// from --log-level when it was given.
func (g *globals) logger(cfg *config.Config) hclog.Logger {
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "host",
		Level:      hclog.LevelFromString(cfg.Host.LogLevel),
		Output:     g.stderr,
		JSONFormat: cfg.Host.LogFormat == "json",
	})
	// go-plugin reports some broker events through the standard library
	// logger; route them into hclog so they obey the level and format.
	log.SetFlags(0)
	log.SetOutput(newStdLogWriter(logger))
	return logger
}

// startHost loads the config and starts the host. Capability and pack
// problems are logged as warnings (they only withdraw what they concern);
// config problems stop here, and so does a required capability that is
// waiting for what its plugin needs, unless listing is set: a one-shot
// command fails at once rather than wait for as long as an outage lasts,
// while one that only lists what the host has shows it. The caller must
// Close the host.
func (g *globals) startHost(ctx context.Context, listing bool) (*host.Host, error) {
	cfg, ldr, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	return g.startHostFor(ctx, cfg, ldr, listing)
}

// startHostWith starts a host for cfg, already loaded by ldr, as
// startHost does for a command that does not only list.
func (g *globals) startHostWith(ctx context.Context, cfg *config.Config, ldr *config.Loader) (*host.Host, error) {
	return g.startHostFor(ctx, cfg, ldr, false)
}

func (g *globals) startHostFor(ctx context.Context, cfg *config.Config, ldr *config.Loader, listing bool) (*host.Host, error) {
	logger := g.logger(cfg)
	h := g.newHost(cfg, ldr, logger)
	rep := h.Start(ctx)
	warnDiagnostics(logger, append(rep.Capabilities, rep.Packs...))
	fatal := rep.Config
	if !listing {
		fatal = append(fatal, rep.Waiting...)
	}
	if fatal.HasErrors() {
		_ = config.WriteDiagnostics(g.stderr, ldr.Files(), fatal)
		h.Close()
		return nil, &exitError{code: 1}
	}
	return h, nil
}

// signalContext is cancelled on SIGINT or SIGTERM, so a run in flight is
// cancelled and the host still stops every process it started.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
