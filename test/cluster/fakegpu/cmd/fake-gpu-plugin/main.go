// Command fake-gpu-plugin is the cluster tier's test-only NVIDIA device
// plugin: it advertises the GPUs of a sysfs tree (the fixture's) to kubelet
// as nvidia.com/gpu with their NUMA nodes (see package fakegpu). Never
// shipped in the rdmanet image.
//
//	fake-gpu-plugin --sysfs-root=DIR [--device-plugin-dir=DIR] [--replicas=N]
//	fake-gpu-plugin --sysfs-root=DIR --list     (print the GPUs as JSON, exit)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/rdmanet/rdmanet/test/cluster/fakegpu"
)

func main() {
	var o fakegpu.Options
	fs := flag.NewFlagSet("fake-gpu-plugin", flag.ContinueOnError)
	fs.StringVar(&o.SysfsRoot, "sysfs-root", "/sys", "sysfs tree to read the GPUs from (vendor 0x10de, display/3D class)")
	fs.StringVar(&o.PluginDir, "device-plugin-dir", fakegpu.DefaultPluginDir, "kubelet's device-plugin directory (the plugin's socket goes here)")
	fs.StringVar(&o.KubeletSocket, "kubelet-socket", "", "kubelet's registration socket (default <device-plugin-dir>/kubelet.sock)")
	fs.StringVar(&o.Resource, "resource-name", fakegpu.DefaultResource, "extended resource to advertise")
	fs.IntVar(&o.Replicas, "replicas", 1, "devices per GPU (IDs <pci>::<i> when > 1, like the NVIDIA plugin's time-slicing)")
	fs.DurationVar(&o.Resync, "resync", fakegpu.DefaultResync, "how often to check for a kubelet restart (directory events are seen at once)")
	list := fs.Bool("list", false, "print the GPUs found under --sysfs-root as JSON and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fake-gpu-plugin: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if err := run(o, *list); err != nil {
		fmt.Fprintln(os.Stderr, "fake-gpu-plugin:", err)
		os.Exit(1)
	}
}

func run(o fakegpu.Options, list bool) error {
	if list {
		gpus, err := fakegpu.Discover(o.SysfsRoot)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(gpus)
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	p, err := fakegpu.New(o)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return p.Run(ctx)
}
