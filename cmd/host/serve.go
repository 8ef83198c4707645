package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/wophost/wophost/core/api"
	"github.com/wophost/wophost/core/config"
	"github.com/wophost/wophost/core/console"
	"github.com/wophost/wophost/core/console/figures"
	"github.com/wophost/wophost/core/host"
	"github.com/wophost/wophost/core/registry"
	"github.com/wophost/wophost/core/telemetry"
)

func serveCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the host as a daemon with its HTTP API",
		Long: "Start every plugin and pack, then serve the HTTP API configured in the host block's\n" +
			"http block (127.0.0.1:7427 by default) until SIGINT or SIGTERM. SIGHUP reloads the\n" +
			"config: the new plugin set starts beside the old one and takes over once ready; a\n" +
			"config with errors is refused and the old set keeps serving.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.serve()
		},
	}
}

// daemon is the state of one `host serve`.
type daemon struct {
	g       *globals
	logger  hclog.Logger
	http    config.HTTP
	current *api.Current
	metrics *telemetry.Metrics
}

func (g *globals) serve() error {
	cfg, ldr, err := g.loadConfig()
	if err != nil {
		return err
	}
	logger := g.logger(cfg)
	d := &daemon{g: g, logger: logger, http: httpSettings(cfg), current: api.NewCurrent(nil)}
	d.metrics = telemetry.NewMetrics(d.records)
	d.metrics.WatchPacks(d.packs)

	// Bind first: a port in use should fail before any plugin starts.
	ln, err := net.Listen("tcp", d.http.Listen)
	if err != nil {
		return listenFailure(d.http, err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	reload := make(chan os.Signal, 1)
	signal.Notify(reload, syscall.SIGHUP)
	defer signal.Stop(stop)
	defer signal.Stop(reload)

	// The API serves from the start: /healthz answers at once and the
	// other routes say that no host is running (503) until the plugins
	// and packs are up, so that no slow plugin holds the listener back.
	handler := api.New(d.current, api.Options{
		Tokens:       d.http.Tokens,
		TokenScopes:  d.http.TokenScopes,
		MaxBodyBytes: int64(cfg.Host.MaxMessageBytes),
		Metrics:      d.metrics.Handler(),
		OnRun:        d.metrics.RunFinished,
		Agents:       agentsForAPI,
		Logger:       logger.Named("api"),
	})
	if d.http.Console {
		stopSampling, err := d.mountConsole(handler)
		if err != nil {
			return err
		}
		defer stopSampling()
	}
	srv := &http.Server{
		Handler:           handler,
		ReadTimeout:       d.http.ReadTimeout,
		ReadHeaderTimeout: d.http.ReadHeaderTimeout,
		IdleTimeout:       d.http.IdleTimeout,
		MaxHeaderBytes:    d.http.MaxHeaderBytes,
		ErrorLog:          logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(netutil.LimitListener(ln, d.http.MaxConnections)) }()
	logger.Info("listening; starting plugins and packs", "address", ln.Addr().String())

	// Starting can take a while; a stop signal meanwhile cancels it.
	startCtx, cancelStart := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancelStart()
		case <-startCtx.Done():
		}
	}()
	h, err := d.start(startCtx, cfg, ldr)
	stopped := startCtx.Err() != nil
	cancelStart()
	if err != nil || stopped {
		srv.Close()
		if h != nil {
			h.Close()
		}
		return err
	}
	d.current.Swap(h)
	if d.http.Console {
		logger.Info("serving", "address", ln.Addr().String(), "auth", len(d.http.Tokens) > 0, "console", "http://"+ln.Addr().String()+console.Prefix)
	} else {
		logger.Info("serving", "address", ln.Addr().String(), "auth", len(d.http.Tokens) > 0)
	}

	for {
		select {
		case err := <-served:
			d.shutdown(srv)
			return fmt.Errorf("serve http: %w", err)
		case <-reload:
			d.reload()
		case sig := <-stop:
			logger.Info("stopping", "signal", sig.String())
			d.shutdown(srv)
			return nil
		}
	}
}

// mountConsole serves the operator console under /ui/ of the API and
// starts sampling the metrics its figures page draws; the func it
// returns stops the sampling.
func (d *daemon) mountConsole(a *api.Server) (func(), error) {
	sampler := figures.NewSampler(d.metrics.Gatherer(), figures.Options{})
	c, err := console.New(console.Options{
		Acquire: func() (console.Backend, func()) {
			b, release := d.current.Acquire()
			h, _ := b.(*host.Host)
			if h == nil {
				return nil, release
			}
			return h, release
		},
		Access:  a,
		Figures: sampler,
		Version: version,
		Started: time.Now(),
		Logger:  d.logger.Named("console"),
	})
	if err != nil {
		return nil, err
	}
	a.Mount(console.Prefix, c)
	ctx, stop := context.WithCancel(context.Background())
	go sampler.Run(ctx)
	return stop, nil
}

// httpSettings returns the config's http block or its defaults.
func httpSettings(cfg *config.Config) config.HTTP {
	if cfg.Host.HTTP != nil {
		return *cfg.Host.HTTP
	}
	return config.DefaultHTTP()
}

// start starts a host for cfg. Capability and pack problems are logged;
// config problems are returned.
func (d *daemon) start(ctx context.Context, cfg *config.Config, ldr *config.Loader) (*host.Host, error) {
	h := d.g.newHost(cfg, ldr, d.logger)
	h.ObserveCalls(d.metrics)
	h.ObserveSandbox(func(pack, code string) {
		if rule, ok := telemetry.SandboxRuleOf(code); ok {
			d.metrics.SandboxViolation(pack, rule)
		}
	})
	rep := h.Start(ctx)
	// A required capability that is waiting does not hold the host back:
	// it serves the rest, /readyz says 503 until it is ready.
	warnDiagnostics(d.logger, append(append(rep.Capabilities, rep.Packs...), rep.Waiting...))
	if rep.Fatal() {
		h.Close()
		return nil, fmt.Errorf("config %s:\n%s", cfg.Path, config.FormatDiagnostics(rep.Config))
	}
	return h, nil
}

// records reads the current host's registry for the metrics.
func (d *daemon) records() []registry.Record {
	b, release := d.current.Acquire()
	defer release()
	if b == nil {
		return nil
	}
	return b.Registry().Records()
}

// packs reads the current host's packs for the metrics.
func (d *daemon) packs() []telemetry.PackRecord {
	b, release := d.current.Acquire()
	defer release()
	if b == nil {
		return nil
	}
	var out []telemetry.PackRecord
	for _, p := range b.Packs() {
		out = append(out, telemetry.PackRecord{Name: p.Name, State: string(p.State), Restarts: p.Restarts})
	}
	return out
}

// reload applies the config file as it is now: the running host hands
// what did not change to a new one, which takes over new requests; the
// old one finishes the calls it holds and stops. A config with errors, or
// one under which something that serves now would stop serving, leaves
// the running host as it is.
func (d *daemon) reload() {
	d.logger.Info("reloading", "config", d.g.configPath)
	cfg, ldr, diags := d.g.readConfig()
	if diags.HasErrors() || cfg == nil {
		d.logger.Error("reload refused: the config has errors; the running host keeps serving",
			"diagnostics", config.FormatDiagnostics(diags))
		return
	}
	if next := httpSettings(cfg); next.Listen != d.http.Listen || !slices.Equal(next.Tokens, d.http.Tokens) ||
		!maps.EqualFunc(next.TokenScopes, d.http.TokenScopes, slices.Equal) {
		d.logger.Warn("the http block changed; listen and tokens take effect at the next start, not on reload")
	}
	b, release := d.current.Acquire()
	cur, _ := b.(*host.Host)
	release()
	if cur == nil {
		d.logger.Error("reload refused: no host is running")
		return
	}
	next, rep, err := cur.Reload(context.Background(), cfg, ldr)
	if rep != nil {
		warnDiagnostics(d.logger, append(append(rep.Capabilities, rep.Packs...), rep.Waiting...))
	}
	if err != nil {
		d.logger.Error("reload refused; the running host keeps serving", "error", err)
		return
	}
	d.g.applyGoMaxProcs(cfg)
	old, drained := d.current.Swap(next)
	d.logger.Info("reloaded; the previous host stops once its calls finish")
	go d.retire(old, drained)
}

// retire waits for old's calls, up to the shutdown timeout, then stops it.
func (d *daemon) retire(old api.Backend, drained func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.http.ShutdownTimeout)
	defer cancel()
	if err := drained(ctx); err != nil {
		d.logger.Warn("calls still in flight on the previous host after the shutdown timeout; stopping it", "timeout", d.http.ShutdownTimeout)
	}
	if h, ok := old.(*host.Host); ok && h != nil {
		h.Close()
	}
}

// shutdown stops accepting, waits for requests in flight up to the
// shutdown timeout, then stops the host and every process it started.
func (d *daemon) shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), d.http.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			d.logger.Warn("requests still in flight after the shutdown timeout; stopping anyway", "timeout", d.http.ShutdownTimeout)
		}
		srv.Close()
	}
	old, _ := d.current.Swap(nil)
	if h, ok := old.(*host.Host); ok && h != nil {
		h.Close()
	}
}
