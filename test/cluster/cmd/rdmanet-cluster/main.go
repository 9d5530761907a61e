// Command rdmanet-cluster starts, inspects and stops the real single-node
// Kubernetes cluster of rdmanet's cluster tier (package test/cluster).
// Test-only: never shipped. `make cluster-up` / `make cluster-down` run it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rdmanet/rdmanet/test/cluster"
)

const usage = `usage: rdmanet-cluster COMMAND [flags]

Commands:
  up        build what is missing, start the control plane and --nodes nodes, install
            rdmanet, wait until Ready; prints "export KUBECONFIG=<path>" last.
            A running cluster is reused.
  down      delete workloads, uninstall rdmanet, stop every node, check the machine is as before
  status    each node's processes as its supervisor sees them
  restart   NAME: restart one part of the first node (kubelet, containerd, kube-apiserver, ...)
  node-down NODE: crash a node (its kubelet, containerd and pods killed, its Node object deleted)
  node-up   NODE: start a node again after node-down and wait until it is Ready
  supervise (internal) one node's supervisor; started by up in its own mount namespace

Flags:
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	verb := os.Args[1]
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	wd, _ := os.Getwd()
	stateDir := fs.String("state-dir", filepath.Join(wd, "_output/cluster"), "the cluster's state directory")
	repo := fs.String("repo", wd, "the rdmanet checkout (tools, images, overlay)")
	forward := fs.String("forward", cluster.DefaultForward, "the machine's loopback address that forwards to the API server")
	gpus := fs.Int("gpus", -1, "fixture GPUs per node served as nvidia.com/gpu by the test-only fake GPU plugin (default: 32 on a single node, 8 per node on several, as on an HGX board, so each 8-GPU rank of the seeds' Jobs takes a node)")
	bare := fs.Bool("bare", false, "up: start the nodes without installing rdmanet")
	nodes := fs.Int("nodes", 3, fmt.Sprintf("up: number of nodes, 1 to %d; the first also runs the control plane", cluster.MaxNodes))
	shared := fs.Int("shared-nodes", -1, "up: how many of the nodes (the last ones) run the shared RDMA netns mode; the others the exclusive mode (default: 1 when there are several nodes, else 0)")
	node := fs.String("node", cluster.NodeName, "supervise: the node this supervisor runs")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if verb == "-h" || verb == "--help" || verb == "help" {
		fs.Usage()
		return
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	l, err := cluster.NewLayout(*stateDir, *repo)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	switch verb {
	case "up":
		if *gpus < 0 {
			*gpus = 32
			if *nodes > 1 {
				*gpus = 8
			}
		}
		st, err := cluster.Up(ctx, l, cluster.Options{Forward: *forward, GPUs: *gpus, Install: !*bare, Nodes: *nodes, SharedNodes: *shared})
		if err != nil {
			fail(fmt.Errorf("%w\n(state kept in %s; logs in %s; make cluster-down cleans up)", err, l.Dir, l.Logs()))
		}
		fmt.Printf("export KUBECONFIG=%s\n", st.Kubeconfig)
	case "down":
		if err := cluster.Down(ctx, l, os.Stdout); err != nil {
			fail(err)
		}
	case "status":
		ns, err := l.Nodes()
		if err != nil {
			fail(err)
		}
		down := 0
		for _, n := range ns {
			st, err := cluster.NewNodeControl(l, n).Status(ctx)
			if err != nil {
				fmt.Printf("%s (%s, %s): supervisor not answering: %v\n", n.Name, n.IP, n.Mode, err)
				down++
				continue
			}
			fmt.Printf("%s (%s, %s):\n", n.Name, n.IP, n.Mode)
			for _, c := range st.Components {
				fmt.Printf("  %-24s pid=%-7d running=%-5v ready=%-5v since=%s\n", c.Name, c.PID, c.Running, c.Ready, c.Since)
			}
		}
		if down > 0 {
			fail(fmt.Errorf("%d of %d nodes' supervisors not answering in %s", down, len(ns), l.Dir))
		}
	case "restart":
		if fs.NArg() != 1 {
			fail(fmt.Errorf("restart needs one component name"))
		}
		if err := cluster.NewControl(l).Restart(ctx, fs.Arg(0)); err != nil {
			fail(err)
		}
	case "node-down", "node-up":
		if fs.NArg() != 1 {
			fail(fmt.Errorf("%s needs one node name (make cluster-status lists them)", verb))
		}
		f := cluster.NodeDown
		if verb == "node-up" {
			f = cluster.NodeUp
		}
		if err := f(ctx, l, fs.Arg(0), os.Stdout); err != nil {
			fail(err)
		}
	case "supervise":
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		if err := cluster.Supervise(ctx, l, *node, *forward, log); err != nil {
			log.Error("supervisor failed", "err", err)
			os.Exit(1)
		}
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rdmanet-cluster:", err)
	os.Exit(1)
}
