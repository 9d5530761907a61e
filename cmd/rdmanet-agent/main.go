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
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/netops"
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
	logFormat := fs.String("log-format", "text", "text or json (logs go to stderr)")
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
	switch o.NetnsModeFlag {
	case "", inventory.NetnsExclusive, inventory.NetnsShared:
	default:
		fmt.Fprintf(os.Stderr, "rdmanet-agent: --rdma-netns-mode=%q: must be exclusive or shared\n", o.NetnsModeFlag)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-agent: --log-level=%q: must be debug, info, warn or error\n", *logLevel)
		return 2
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, hopts)
	if *logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, hopts)
	}
	o.Logger = slog.New(h)

	if *once {
		specs, err := agent.LoadConfig(o.ConfigPaths)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
			return 1
		}
		snap, err := agent.Discover(o, specs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
			return 1
		}
		rep := agent.NewReport(snap)
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
	a, err := agent.New(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-agent: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	o.Logger.Info("rdmanet-agent starting", "sysfs", o.SysfsRoot, "configs", o.ConfigPaths, "plugin_dir", o.PluginDir)
	if err := a.Run(ctx); err != nil {
		o.Logger.Error("agent stopped", "err", err)
		return 1
	}
	return 0
}
