// Package daemon is rdmanet-daemon: it keeps the CNI hot path warm. It
// serves the rdmanet meta CNI shim on the config's daemonSocket (informer
// caches of the node's pods and every NAD, one kubelet PodResources
// connection, the plugin logic of rdmanet-direct) and the exec'd rdmanet
// plugins on the plugin socket (plugind), running rdmanet's own plugins
// in-process (inproc), with /metrics, /healthz and /readyz (metrics,
// health). Each plugin and the shim does the work itself when the daemon is
// not running, so the daemon is never needed for correctness.
//
// Config holds every flag of the binary; Run is the whole daemon.
// cmd/rdmanet-daemon parses the flags and calls Run. The clients' side of
// the sockets is internal/daemonclient.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/daemon/health"
	"github.com/rdmanet/rdmanet/internal/daemon/inproc"
	"github.com/rdmanet/rdmanet/internal/daemon/metrics"
	"github.com/rdmanet/rdmanet/internal/daemon/plugind"
	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/telemetry"
)

// Config is every setting of rdmanet-daemon (its flags; cmd/rdmanet-daemon
// documents each). Zero values are not defaults: the flags' defaults are.
type Config struct {
	ConfPath        string        // --config: the rdmanet network config
	Socket          string        // --socket ("": the config's daemonSocket)
	NodeName        string        // --node-name
	LogLevel        string        // --log-level
	LogFormat       string        // --log-format
	SyncTimeout     time.Duration // --sync-timeout
	StatusWrite     string        // --status-write: async or sync
	Probe           bool          // --probe
	InProcess       bool          // --in-process-plugins
	MetricsAddr     string        // --metrics-addr ("": off)
	IPAMStateDir    string        // --ipam-state-dir ("": no IPAM metrics)
	RequestTimeout  time.Duration // --request-timeout
	RetryInterval   time.Duration // --del-retry-interval
	RetryBackoff    time.Duration // --del-retry-backoff
	RetryMaxBackoff time.Duration // --del-retry-max-backoff
	PodEvents       bool          // --pod-events
	Meta            bool          // --meta: serve the meta shim's socket
	PluginSocket    string        // --plugin-socket ("": off)
	// Calls bounds the CNI calls in flight over both sockets
	// (--max-inflight-calls, --del-reserved-calls, --max-queued-calls,
	// --max-queue-wait; MaxInFlight 0: no limit).
	Calls sockserve.Limits
}

// ExitError is Run's error with the process exit status it calls for: 2
// for a flag's bad value (usage), 1 for anything else. Logged means the
// daemon's log already carries it.
type ExitError struct {
	Code   int
	Logged bool
	Err    error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func usage(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

func failed(format string, args ...any) error {
	return &ExitError{Code: 1, Err: fmt.Errorf(format, args...)}
}

// Exit is the exit status of Run's error, after writing it to stderr as
// "rdmanet-daemon: <error>" unless the log already has it.
func Exit(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code, logged := 1, false
	var ee *ExitError
	if errors.As(err, &ee) {
		code, logged = ee.Code, ee.Logged
	}
	if !logged {
		fmt.Fprintf(stderr, "rdmanet-daemon: %v\n", err)
	}
	return code
}

// Run runs the daemon until SIGINT or SIGTERM (or ctx ends): with c.Probe
// it only checks that a daemon answers on the socket. Its error is an
// *ExitError (see Exit).
func Run(ctx context.Context, c Config) error {
	if c.StatusWrite != "async" && c.StatusWrite != "sync" {
		return usage("--status-write=%q: must be async or sync", c.StatusWrite)
	}
	log, err := telemetry.NewLogger(os.Stderr, c.LogFormat, c.LogLevel)
	if err != nil {
		return usage("%w", err)
	}
	lim, err := sockserve.NewLimiter(c.Calls, log)
	if err != nil {
		return usage("%w", err)
	}
	if !c.Meta {
		if c.PluginSocket == "" {
			return usage("--meta=false and --plugin-socket=\"\": nothing to serve; fix: set --plugin-socket or drop --meta=false")
		}
		if c.Probe {
			return probeSocket(c.PluginSocket)
		}
		return servePlugins(ctx, log, c, lim)
	}
	b, err := os.ReadFile(c.ConfPath)
	if err != nil {
		return failed("%w", err)
	}
	conf, err := meta.ParseConfig(b)
	if err != nil {
		return failed("%s: %w", c.ConfPath, err)
	}
	socket := c.Socket
	if socket == "" {
		socket = conf.DaemonSocket
	}
	if socket == "" {
		return usage("no socket: set --socket or daemonSocket in %s", c.ConfPath)
	}
	if c.Probe {
		return probeSocket(socket)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for _, w := range conf.Warnings {
		log.Warn(w, "config", c.ConfPath)
	}
	d := &MetaServer{Socket: socket, Log: log, RequestTimeout: c.RequestTimeout,
		Retry: conf, RetryInterval: c.RetryInterval, RetryBackoff: c.RetryBackoff, RetryMaxBackoff: c.RetryMaxBackoff}
	ps := &plugind.Server{Socket: c.PluginSocket, Log: log, Limiter: lim}
	var sourceReady atomic.Bool
	h := &health.Daemon{Meta: d, MetaSocket: socket, SourceReady: &sourceReady, SourceType: conf.Source.Type}
	if c.PluginSocket != "" {
		h.Plugins, h.PluginSocket = ps, c.PluginSocket
	}
	m, stopMetrics, err := startMetrics(log, c.MetricsAddr, c.IPAMStateDir, h.Live(), h.Ready())
	if err != nil {
		return usage("--metrics-addr: %w", err)
	}
	defer stopMetrics()
	ex := inproc.New(log)
	if m != nil {
		d.Observer, ps.Observer, ex.Observer = m, m, m
		m.CallLimiter(lim)
	}
	ps.Runner = ex
	if c.InProcess {
		d.Exec = ex
	} else if m != nil {
		// every plugin as a process, through an Exec that only observes
		d.Exec = &inproc.Exec{Log: log, Plugins: map[string]inproc.Plugin{}, Observer: m}
	}
	release, err := d.connect(ctx, c, conf, m, &sourceReady)
	if err != nil {
		return err
	}
	defer release()
	log.Info("rdmanet-daemon serving", "socket", socket, "plugin_socket", c.PluginSocket, "node", c.NodeName, "source", conf.Source.Type, "status_write", c.StatusWrite, "in_process_plugins", c.InProcess, "max_inflight_calls", c.Calls.MaxInFlight)
	pluginsDone := make(chan error, 1)
	if c.PluginSocket != "" {
		go func() { pluginsDone <- ps.Serve(ctx) }()
	} else {
		pluginsDone <- nil
	}
	// the meta socket shares the plugin socket's limit on calls in flight
	err = d.Serve(sockserve.WithLimiter(ctx, lim))
	stop() // one server failing stops the other
	if perr := <-pluginsDone; err == nil {
		err = perr
	}
	return stopped(log, err)
}

// servePlugins runs the daemon with the plugin socket only (--meta=false).
func servePlugins(ctx context.Context, log *slog.Logger, c Config, lim *sockserve.Limiter) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ex := inproc.New(log)
	ps := &plugind.Server{Socket: c.PluginSocket, Runner: ex, Log: log, Limiter: lim}
	h := &health.Daemon{Plugins: ps, PluginSocket: c.PluginSocket}
	m, stopMetrics, err := startMetrics(log, c.MetricsAddr, c.IPAMStateDir, h.Live(), h.Ready())
	if err != nil {
		return usage("--metrics-addr: %w", err)
	}
	defer stopMetrics()
	if m != nil {
		ps.Observer, ex.Observer = m, m
		m.CallLimiter(lim)
	}
	log.Info("rdmanet-daemon serving plugins only", "plugin_socket", c.PluginSocket)
	return stopped(log, ps.Serve(ctx))
}

// stopped logs a server's failure; the error says the log has it.
func stopped(log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	log.Error("daemon stopped", "err", err)
	return &ExitError{Code: 1, Logged: true, Err: err}
}

// startMetrics serves /metrics, /healthz and /readyz on addr ("": off,
// nil metrics).
func startMetrics(log *slog.Logger, addr, ipamStateDir string, live, ready telemetry.Checks) (*metrics.Metrics, func(), error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	m := metrics.New()
	if ipamStateDir != "" {
		m.IPAMUsage(ipamStateDir)
	}
	m.Ready(func() bool { return len(ready.Failures()) == 0 })
	srv, err := telemetry.Serve(log, addr, telemetry.Mux(m.Handler(), live, ready))
	if err != nil {
		return nil, nil, err
	}
	return m, func() { _ = srv.Close() }, nil
}

// probeSocket is --probe: nil when the daemon answers on socket.
func probeSocket(socket string) error {
	if err := daemonclient.Probe(socket, 3*time.Second); err != nil {
		return failed("not ready: %w", err)
	}
	return nil
}
