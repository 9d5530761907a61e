package gc

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Main is the `rdmanet-ipam gc` command: flags → Options → Run → report.
// It returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rdmanet-ipam gc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	storeType := fs.String("store", ipam.StoreKubernetes, `store to collect: "kubernetes" (IPAMBlock CRDs) or "local" (a node's file)`)
	storePath := fs.String("store-path", ipam.DefaultLocalStorePath, "directory of the local store (with -store=local)")
	network := fs.String("network", "", "only this IPAM network (default: all)")
	dryRun := fs.Bool("dry-run", false, "report what would be released without changing anything")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	grace := fs.Duration("grace", DefaultGrace, "never release allocations younger than this (0: no grace period)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" {
		fmt.Fprintln(stderr, "rdmanet-ipam gc: -kubeconfig is required (pods and nodes are checked against the API server)")
		return 2
	}
	rc, err := ipam.RESTConfigFromKubeconfig(*kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var store ipam.Store
	switch *storeType {
	case ipam.StoreKubernetes:
		if store, err = ipam.NewKubeStore(rc); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	case ipam.StoreLocal:
		store = &ipam.LocalStore{Dir: *storePath}
	default:
		fmt.Fprintf(stderr, "rdmanet-ipam gc: -store=%q: use \"kubernetes\" or \"local\"\n", *storeType)
		return 2
	}
	cluster, err := NewKubeCluster(rc)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := Run(ctx, Options{Store: store, Cluster: cluster, Network: *network, DryRun: *dryRun, Grace: GraceFlag(*grace)})
	PrintReport(stdout, rep, *dryRun)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// PrintReport writes a human-readable report.
func PrintReport(w io.Writer, rep Report, dryRun bool) {
	verb := "released"
	if dryRun {
		verb = "would release"
	}
	for _, r := range rep.Released {
		fmt.Fprintf(w, "%s %s (network %s, block %s, container %s, pod %s/%s): %s\n",
			verb, r.Address, r.Network, r.Block, short(r.Holder.ContainerID), r.Holder.PodNamespace, r.Holder.PodName, r.Reason)
	}
	for _, b := range rep.DeletedBlocks {
		if dryRun {
			fmt.Fprintf(w, "would delete empty block %s of a deleted node\n", b)
		} else {
			fmt.Fprintf(w, "deleted empty block %s of a deleted node\n", b)
		}
	}
	fmt.Fprintf(w, "ipam-gc: blocks=%d allocations=%d released=%d kept=%d deleted_blocks=%d dry_run=%t young=%d reserved=%d\n",
		rep.Blocks, rep.Allocations, len(rep.Released), rep.Kept, len(rep.DeletedBlocks), dryRun, rep.Young, rep.Reserved)
}

// GraceFlag maps a -grace/--grace flag value to Options.Grace: 0 on the
// command line means no grace period.
func GraceFlag(d time.Duration) time.Duration {
	if d <= 0 {
		return NoGrace
	}
	return d
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
