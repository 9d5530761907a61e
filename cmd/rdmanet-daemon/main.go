// Command rdmanet-daemon serves the rdmanet CNI shim on a unix socket with
// warm state: informer caches of the node's pods and every NAD, one kubelet
// PodResources connection, and the plugin logic of rdmanet-direct.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/telemetry"
	"github.com/rdmanet/rdmanet/internal/version"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("rdmanet-daemon", flag.ContinueOnError)
	version.Flag(fs, "rdmanet-daemon")
	confPath := fs.String("config", "/etc/cni/net.d/00-rdmanet.conf", "the rdmanet network config (the same file the runtime passes to the shim): kubeconfig, source, podResourcesSocket, daemonSocket")
	socket := fs.String("socket", "", "unix socket to serve (default: the config's daemonSocket)")
	node := fs.String("node-name", os.Getenv("NODE_NAME"), "this node's name: the pod cache holds only its pods (default $NODE_NAME)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", telemetry.LogText, "text or json (logs go to stderr); a CNI call's records carry container, pod_namespace and pod_name")
	syncTimeout := fs.Duration("sync-timeout", 60*time.Second, "how long to wait for the first informer sync")
	statusWrite := fs.String("status-write", "async", "when the network-status annotation is written: \"async\" (after ADD has answered the runtime; transient API errors retried for up to 2m, cancelled by the container's DEL) or \"sync\" (before ADD answers; a failed write fails the ADD)")
	probe := fs.Bool("probe", false, "readiness check (no shell in the image): exit 0 when the daemon answers on its socket (--socket, else the daemonSocket of --config, which is read), else 1")
	inProcess := fs.Bool("in-process-plugins", true, "run rdmanet's own delegate plugins (sriov, rdma, rdmanet-ipam, also as whereabouts) inside the daemon instead of exec'ing them, when the file on the CNI path is the same rdmanet build as this daemon (same VCS revision or module version, per its Go build info); other plugins, other builds and unstamped builds always run as processes. --log-level=debug logs the decision per plugin file. false: every plugin runs as a process")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus /metrics (docs/metrics.md), /healthz (the serve loops run) and /readyz (the sockets answer, the informer caches are synced) over HTTP on this host:port, e.g. 127.0.0.1:9464. Empty (the default): off, since the daemon runs in the host network namespace and which address and port to open on a node is the operator's choice (deploy/ opens 9464 on the node's IP). Never on the CNI path: scrapes read counters and cached files only")
	ipamStateDir := fs.String("ipam-state-dir", ipam.DefaultLocalStorePath, "rdmanet-ipam's node-local state directory (its store path), whose block caches give the rdmanet_ipam_* usage metrics; empty: no IPAM metrics")
	requestTimeout := fs.Duration("request-timeout", 0, "deadline of a call whose request carries none (a shim of an older release); 0: the config's addTimeout (ADD, CHECK, STATUS) or delTimeout (DEL). A shim of this release sends its own")
	retryInterval := fs.Duration("del-retry-interval", meta.DefaultRetryInterval, "how often to look for DELs that left delegates behind (the cache's pending records) and retry those due")
	retryBackoff := fs.Duration("del-retry-backoff", meta.DefaultRetryBackoff, "first delay before a pending DEL is retried, doubled per attempt up to --del-retry-max-backoff")
	retryMaxBackoff := fs.Duration("del-retry-max-backoff", meta.DefaultRetryMaxBackoff, "longest delay between retries of a pending DEL (it is retried until it succeeds)")
	podEvents := fs.Bool("pod-events", true, "record a Warning Event (reason "+meta.EventReasonAttachFailed+", the CNI error's text and fix) on the pod of every failed ADD, so `kubectl describe pod` shows why its sandbox does not start; repeats are aggregated and rate-limited per pod (client-go's event correlator: 25 at once, then one per 5 minutes). Needs events create/patch (deploy/rbac-daemon.yaml); the kubernetes source only")
	serveMeta := fs.Bool("meta", true, "serve the rdmanet meta CNI shim on the config's daemonSocket (needs --config). false: serve only --plugin-socket, e.g. on a node where Multus stays the meta plugin and rdmanet's sriov, rdma and rdmanet-ipam are its delegates")
	pluginSocket := fs.String("plugin-socket", daemonclient.DefaultSocket, "unix socket on which exec'd rdmanet plugins (sriov, rdma, rdmanet-ipam, also as whereabouts) hand their calls to this daemon, which runs them in-process with warm API clients when the plugin file is this daemon's build (else the plugin does the work itself, as when no daemon runs); the plugins look here unless RDMANET_PLUGIN_SOCKET says otherwise. Empty: off")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "rdmanet-daemon keeps the CNI hot path warm: it serves the rdmanet meta CNI shim (--config's daemonSocket) and the\nexec'd rdmanet plugins sriov, rdma and rdmanet-ipam (--plugin-socket). Each plugin and the shim does the work itself when\nthe daemon is not running, so the daemon is never needed for correctness.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *statusWrite != "async" && *statusWrite != "sync" {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: --status-write=%q: must be async or sync\n", *statusWrite)
		return 2
	}
	log, err := telemetry.NewLogger(os.Stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: %v\n", err)
		return 2
	}
	if !*serveMeta {
		if *pluginSocket == "" {
			fmt.Fprintln(os.Stderr, "rdmanet-daemon: --meta=false and --plugin-socket=\"\": nothing to serve; fix: set --plugin-socket or drop --meta=false")
			return 2
		}
		if *probe {
			return probeSocket(*pluginSocket)
		}
		return servePlugins(log, *pluginSocket, *metricsAddr, *ipamStateDir)
	}
	b, err := os.ReadFile(*confPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: %v\n", err)
		return 1
	}
	conf, err := meta.ParseConfig(b)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: %s: %v\n", *confPath, err)
		return 1
	}
	if *socket == "" {
		*socket = conf.DaemonSocket
	}
	if *socket == "" {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: no socket: set --socket or daemonSocket in %s\n", *confPath)
		return 2
	}
	if *probe {
		return probeSocket(*socket)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for _, w := range conf.Warnings {
		log.Warn(w, "config", *confPath)
	}
	d := &meta.Daemon{Socket: *socket, Log: log, RequestTimeout: *requestTimeout,
		Retry: conf, RetryInterval: *retryInterval, RetryBackoff: *retryBackoff, RetryMaxBackoff: *retryMaxBackoff}
	ps := &plugind.Server{Socket: *pluginSocket, Log: log}
	var sourceReady atomic.Bool
	h := &health.Daemon{Meta: d, MetaSocket: *socket, SourceReady: &sourceReady, SourceType: conf.Source.Type}
	if *pluginSocket != "" {
		h.Plugins, h.PluginSocket = ps, *pluginSocket
	}
	m, stopMetrics, err := startMetrics(log, *metricsAddr, *ipamStateDir, h.Live(), h.Ready())
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: --metrics-addr: %v\n", err)
		return 2
	}
	defer stopMetrics()
	ex := inproc.New(log)
	if m != nil {
		d.Observer, ps.Observer, ex.Observer = m, m, m
	}
	ps.Runner = ex
	if *inProcess {
		d.Exec = ex
	} else if m != nil {
		// every plugin as a process, through an Exec that only observes
		d.Exec = &inproc.Exec{Log: log, Plugins: map[string]inproc.Plugin{}, Observer: m}
	}
	var claims meta.ClaimDeviceResolver // DRA devices of pods: from ResourceSlices
	switch conf.Source.Type {
	case "static":
		d.Source = &meta.StaticSource{Dir: conf.Source.Dir, StatusDir: conf.Source.StatusDir}
		sourceReady.Store(true)
	default:
		live, err := meta.NewKubeSource(conf.Kubeconfig, 50)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-daemon: %v\n", err)
			return 1
		}
		claims = meta.NewSliceResolver(live.Core)
		sctx, cancel := context.WithTimeout(ctx, *syncTimeout)
		cs, err := meta.NewCachedSource(sctx, live, *node)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-daemon: %v\n", err)
			return 1
		}
		d.Source = cs
		sourceReady.Store(true)
		if *podEvents {
			ev := meta.NewKubeEvents(live.Core, *node)
			defer ev.Shutdown()
			d.Events = ev
		}
	}
	prc, err := meta.NewPodResourcesClient(conf.PodResourcesSocket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: %v\n", err)
		return 1
	}
	defer prc.Close()
	prc.Claims = claims
	d.Devices = prc
	if *statusWrite == "async" {
		d.AsyncStatus = &meta.StatusWriter{Source: d.Source, Log: log, Timeout: conf.APITimeoutDur, Observer: d.Observer}
		if m != nil {
			m.PendingStatusWrites(d.AsyncStatus.Pending)
		}
	}
	log.Info("rdmanet-daemon serving", "socket", *socket, "plugin_socket", *pluginSocket, "node", *node, "source", conf.Source.Type, "status_write", *statusWrite, "in_process_plugins", *inProcess)
	pluginsDone := make(chan error, 1)
	if *pluginSocket != "" {
		go func() { pluginsDone <- ps.Serve(ctx) }()
	} else {
		pluginsDone <- nil
	}
	err = d.Serve(ctx)
	stop() // one server failing stops the other
	if perr := <-pluginsDone; err == nil {
		err = perr
	}
	if err != nil {
		log.Error("daemon stopped", "err", err)
		return 1
	}
	return 0
}

// servePlugins runs the daemon with the plugin socket only (--meta=false).
func servePlugins(log *slog.Logger, socket, metricsAddr, ipamStateDir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ex := inproc.New(log)
	ps := &plugind.Server{Socket: socket, Runner: ex, Log: log}
	h := &health.Daemon{Plugins: ps, PluginSocket: socket}
	m, stopMetrics, err := startMetrics(log, metricsAddr, ipamStateDir, h.Live(), h.Ready())
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: --metrics-addr: %v\n", err)
		return 2
	}
	defer stopMetrics()
	if m != nil {
		ps.Observer, ex.Observer = m, m
	}
	log.Info("rdmanet-daemon serving plugins only", "plugin_socket", socket)
	if err := ps.Serve(ctx); err != nil {
		log.Error("daemon stopped", "err", err)
		return 1
	}
	return 0
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

// probeSocket is --probe: 0 when the daemon answers on socket, else 1.
func probeSocket(socket string) int {
	if err := daemonclient.Probe(socket, 3*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-daemon: not ready: %v\n", err)
		return 1
	}
	return 0
}
