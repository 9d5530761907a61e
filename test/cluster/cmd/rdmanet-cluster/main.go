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
  up        build what is missing, start the node, install rdmanet, wait until Ready;
            prints "export KUBECONFIG=<path>" last. A running cluster is reused.
  down      delete workloads, uninstall rdmanet, stop the node, check the machine is as before
  status    the node's processes as the supervisor sees them
  restart   NAME: restart one part (kubelet, containerd, kube-apiserver, ...)
  supervise (internal) the node's supervisor; started by up in its own mount namespace

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
	gpus := fs.Int("gpus", 32, "fixture GPUs served as nvidia.com/gpu by the test-only fake GPU plugin")
	bare := fs.Bool("bare", false, "up: start the node without installing rdmanet")
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
		st, err := cluster.Up(ctx, l, cluster.Options{Forward: *forward, GPUs: *gpus, Install: !*bare})
		if err != nil {
			fail(fmt.Errorf("%w\n(state kept in %s; logs in %s; make cluster-down cleans up)", err, l.Dir, l.Logs()))
		}
		fmt.Printf("export KUBECONFIG=%s\n", st.Kubeconfig)
	case "down":
		if err := cluster.Down(ctx, l, os.Stdout); err != nil {
			fail(err)
		}
	case "status":
		st, err := cluster.NewControl(l).Status(ctx)
		if err != nil {
			fail(fmt.Errorf("no running cluster in %s: %w", l.Dir, err))
		}
		for _, c := range st.Components {
			fmt.Printf("%-24s pid=%-7d running=%-5v ready=%-5v since=%s\n", c.Name, c.PID, c.Running, c.Ready, c.Since)
		}
	case "restart":
		if fs.NArg() != 1 {
			fail(fmt.Errorf("restart needs one component name"))
		}
		if err := cluster.NewControl(l).Restart(ctx, fs.Arg(0)); err != nil {
			fail(err)
		}
	case "supervise":
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		if err := cluster.Supervise(ctx, l, *forward, log); err != nil {
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
