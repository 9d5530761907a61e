// Command rdmanet-agent is the node agent: RDMA inventory and device plugin
// pools (exclusive SR-IOV VFs and shared HCAs) for kubelet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/agent/agentmetrics"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/telemetry"
	"github.com/rdmanet/rdmanet/internal/version"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type procProbe struct{ procRoot string }

// DefaultRouteLinks: the routing table's default-route devices and every
// netdev under them in the agent's netns (hostNetwork: the node's).
func (p procProbe) DefaultRouteLinks() ([]string, error) {
	return inventory.DefaultRouteNetdevs(p.procRoot, netops.LowerLinks)
}
func (p procProbe) RDMANetnsMode() (string, error) { return rdmaNetnsMode() }

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("rdmanet-agent", flag.ContinueOnError)
	version.Flag(fs, "rdmanet-agent")
	var configs multiFlag
	var o agent.Options
	fs.Var(&configs, "config", "pool configuration file; repeatable. Accepts the SR-IOV Network Device Plugin config.json (resourceList), the rdma-shared-dev-plugin config (configList), a file with both keys, or a ConfigMap / NicClusterPolicy YAML holding them")
	fs.StringVar(&o.SysfsRoot, "sysfs-root", "/sys", "sysfs mount to read the PCI, net and infiniband trees from (a fixture tree in tests and demos)")
	procRoot := fs.String("proc-root", "/proc", "procfs mount; net/route tells which NIC carries the default route (never handed out, nor any PF under it: bond slaves, a VLAN's parent, bridge ports)")
	fs.StringVar(&o.PluginDir, "device-plugin-dir", "/var/lib/kubelet/device-plugins", "kubelet device-plugin directory: one socket per pool is created here")
	fs.StringVar(&o.KubeletSocket, "kubelet-socket", "", "kubelet registration socket (default <device-plugin-dir>/kubelet.sock)")
	fs.StringVar(&o.DevInfoDir, "devinfo-dir", devinfo.DefaultDir, "directory for Network Plumbing WG device-info files read by the CNI side")
	fs.StringVar(&o.NetnsModeFlag, "rdma-netns-mode", "", "state the RDMA subsystem netns mode (exclusive|shared) where the kernel cannot report it; the kernel's answer wins when it has one")
	fs.DurationVar(&o.Resync, "resync", 500*time.Millisecond, "rescan interval: health, VFs appearing/vanishing, kubelet restarts")
	once := fs.Bool("once", false, "discover, build the pools, print them and exit without serving")
	output := fs.String("o", "text", "output of --once: text or json")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", telemetry.LogText, "text or json (logs go to stderr)")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus /metrics (docs/metrics.md), /healthz (the rescan loop goes round) and /readyz (inventory scanned, every advertised pool registered with kubelet) over HTTP on this host:port, e.g. 127.0.0.1:9465. Empty (the default): off, since the agent runs in the host network namespace and which address and port to open on a node is the operator's choice (deploy/ opens 9465 on the node's IP)")
	nodeName := fs.String("node-name", os.Getenv("NODE_NAME"), "this node's name, the \"node\" label of every metric, the Node the agent annotates and whose DRA devices it serves (default $NODE_NAME)")
	podResources := fs.String("pod-resources-socket", "", "kubelet's PodResources socket (e.g. "+dra.DefaultPodResourcesSocket+"): with --metrics-addr, a scrape lists kubelet's allocations for rdmanet_agent_pool_devices_allocated (empty: that metric is off); with --dra, the kubelet plugin asks it which devices pods hold through the device plugin (empty: "+dra.DefaultPodResourcesSocket+")")
	devicePlugin := fs.Bool("device-plugin", true, "serve the advertised pools to kubelet's device manager (one socket per pool in --device-plugin-dir). --device-plugin=false with --dra: the pools are published for DRA only; kubelet then reports their resources with 0 allocatable, so pods that request them in resources.limits (the seeds' example.com/sriov_rdma) are served by kube-scheduler through the DeviceClass whose extendedResourceName names the resource (deploy/dra). That is how a node moves to DRA without changing a workload (docs/dra.md \"Choosing a path\")")
	var api apiFlags
	api.register(fs)
	var hostToken hostTokenFlags
	hostToken.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `rdmanet-agent discovers the node's RDMA NICs and serves them to kubelet as
extended resources: exclusive pools of SR-IOV VFs and shared pools of HCA slots.

Usage:
  rdmanet-agent --config FILE [--config FILE] [flags]          serve (DaemonSet)
  rdmanet-agent --config FILE --once [-o json]                  show what a config selects

Host paths (all flags): --sysfs-root, --proc-root, --device-plugin-dir,
--kubelet-socket, --devinfo-dir.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	o.ConfigPaths = configs
	o.Probe = procProbe{*procRoot}
	if !*devicePlugin && !api.dra && !*once {
		fmt.Fprintln(os.Stderr, "rdmanet-agent: --device-plugin=false without --dra serves the pools to nobody; fix: add --dra (DRA only), or drop --device-plugin=false")
		return 2
	}
	o.NoDevicePlugin = !*devicePlugin
	switch o.NetnsModeFlag {
	case "", inventory.NetnsExclusive, inventory.NetnsShared:
	default:
		fmt.Fprintf(os.Stderr, "rdmanet-agent: --rdma-netns-mode=%q: must be exclusive or shared\n", o.NetnsModeFlag)
		return 2
	}
	log, err := telemetry.NewLogger(os.Stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
		return 2
	}
	o.Logger = log

	if *once {
		cfg, err := agent.LoadConfigFiles(o.ConfigPaths)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
			return 1
		}
		snap, err := agent.Discover(o, cfg.Pools)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
			return 1
		}
		rep := agent.NewReport(snap)
		rep.AddConfig(cfg)
		if *output == "json" {
			err = rep.WriteJSON(os.Stdout)
		} else {
			err = rep.WriteText(os.Stdout)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
			return 1
		}
		return 0
	}
	var m *agentmetrics.Metrics
	if *metricsAddr != "" {
		m = agentmetrics.New(*nodeName)
		o.Observer = m
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, fatal := context.WithCancelCause(ctx)
	defer fatal(nil)
	if err := hostToken.start(ctx, log); err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
		return 2
	}
	apiSvc, err := newAPIServices(api, *nodeName, o.SysfsRoot, o.DevInfoDir, *podResources, fatal, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-agent: API access (--dra, --kubeconfig): %v\n", err)
		return 2
	}
	if apiSvc != nil {
		apiSvc.wire(&o)
	}
	a, err := agent.New(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
		return 1
	}
	if m != nil {
		stopMetrics, err := serveMetrics(log, *metricsAddr, m, a, *podResources)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-agent: --metrics-addr: %v\n", err)
			return 2
		}
		defer stopMetrics()
	}
	if apiSvc != nil {
		stopAPI, err := apiSvc.start(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-agent: --dra: %v\n", err)
			return 1
		}
		defer stopAPI()
	}
	o.Logger.Info("rdmanet-agent starting", "sysfs", o.SysfsRoot, "configs", o.ConfigPaths, "plugin_dir", o.PluginDir)
	if err := a.Run(ctx); err != nil {
		o.Logger.Error("agent stopped", "err", err)
		return 1
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		o.Logger.Error("agent stopped", "err", err)
		return 1
	}
	return 0
}

// livenessLimit is how long the agent's loop may go without a round before
// /healthz fails: a round can wait for a hung kubelet's registration (5 s
// per pool) and a rescan.
const livenessLimit = 2 * time.Minute

// serveMetrics serves /metrics, /healthz and /readyz for a.
func serveMetrics(log *slog.Logger, addr string, m *agentmetrics.Metrics, a *agent.Agent, podResources string) (func(), error) {
	live := telemetry.Checks{{Name: "loop", Fn: func() error { return a.Alive(livenessLimit) }}}
	ready := telemetry.Checks{{Name: "inventory", Fn: a.Scanned}, {Name: "kubelet-registration", Fn: a.Registered}}
	var alloc agentmetrics.AllocationLister
	pr := &agentmetrics.PodResources{Socket: podResources}
	if podResources != "" {
		alloc = pr
	}
	m.Watch(a, alloc, func() bool { return len(ready.Failures()) == 0 })
	srv, err := telemetry.Serve(log, addr, telemetry.Mux(m.Handler(), live, ready))
	if err != nil {
		return nil, err
	}
	return func() { _ = srv.Close(); _ = pr.Close() }, nil
}
