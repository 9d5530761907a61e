package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
	"github.com/rdmanet/rdmanet/internal/textout"
)

func init() { register(newIPAMCmd) }

// ipamDeps connects to the store and the cluster; tests pass fakes.
type ipamDeps struct {
	connect func(o ipamConnOptions) (ipam.Store, gc.Cluster, error)
}

type ipamConnOptions struct {
	kubeconfig, store, storePath string
}

func newIPAMCmd(s streams) *cobra.Command {
	return newIPAMCmdWith(s, ipamDeps{connect: kubeConnect})
}

func newIPAMCmdWith(s streams, deps ipamDeps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ipam",
		Short: "Inspect and maintain rdmanet-ipam address pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return &exitError{code: exitInput, err: fmt.Errorf("ipam: give a subcommand (gc)")}
		},
	}
	cmd.AddCommand(newIPAMGCCmd(s, deps))
	return cmd
}

func newIPAMGCCmd(s streams, deps ipamDeps) *cobra.Command {
	var (
		co      ipamConnOptions
		output  string
		network string
		dryRun  bool
		timeout time.Duration
		grace   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Release IPAM addresses of pods that are gone, recreated or terminated",
		Long: `gc runs one garbage collection pass of rdmanet-ipam (the same library the
controller and 'rdmanet-ipam gc' use). It releases an allocation when its pod
no longer exists, was recreated under the same name (different UID), has
terminated, or when a newer sandbox (container ID) of the same live pod holds
another address for the same interface and the pod's network-status does not
list this one; allocations without pod identity are released only when their
node is gone. No allocation younger than --grace is released (its pod's
status may not be written yet), and gateway reservations are kept. Empty
blocks of deleted nodes are deleted.

Every release is printed with its address, network, block, container, pod
and the reason. --dry-run prints what would be released and changes nothing.

The cluster is the one of --kubeconfig, else $KUBECONFIG, ~/.kube/config or
the in-cluster service account.

Exit status: 0 done (also when something was released), 1 the pass failed
(part of the releases may be applied; re-run), 2 bad usage or an unusable
kubeconfig.`,
		Example: `  kubectl rdma ipam gc --dry-run
  kubectl rdma ipam gc --network rdma-training -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return &exitError{code: exitInput, err: fmt.Errorf("ipam gc: -o %q: want text or json", output)}
			}
			if co.store != ipam.StoreKubernetes && co.store != ipam.StoreLocal {
				return &exitError{code: exitInput, err: fmt.Errorf("ipam gc: --store %q: want kubernetes or local", co.store)}
			}
			store, cluster, err := deps.connect(co)
			if err != nil {
				return &exitError{code: exitInput, err: fmt.Errorf("ipam gc: %w", err)}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rep, runErr := gc.Run(ctx, gc.Options{Store: store, Cluster: cluster, Network: network, DryRun: dryRun, Grace: gc.GraceFlag(grace)})
			if output == "json" {
				err = writeGCJSON(s, rep, dryRun, network, runErr)
			} else {
				gc.PrintReport(s.out, rep, dryRun)
			}
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			if runErr != nil {
				return &exitError{code: exitFindings, err: runErr}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&co.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be released without changing anything")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVar(&network, "network", "", "only this IPAM network (default: all)")
	f.StringVar(&co.store, "store", ipam.StoreKubernetes, "store to collect: kubernetes (IPAMBlock objects) or local (a node's file store)")
	f.StringVar(&co.storePath, "store-path", ipam.DefaultLocalStorePath, "directory of the local store (with --store local)")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	f.DurationVar(&grace, "grace", gc.DefaultGrace, "never release allocations younger than this (0: no grace period)")
	return cmd
}

// kubeConnect builds the store and the cluster view from a kubeconfig.
func kubeConnect(o ipamConnOptions) (ipam.Store, gc.Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("load kubeconfig: %w; fix: pass --kubeconfig or set KUBECONFIG", err)
	}
	cluster, err := gc.NewKubeCluster(rc)
	if err != nil {
		return nil, nil, err
	}
	var store ipam.Store
	if o.store == ipam.StoreLocal {
		store = &ipam.LocalStore{Dir: o.storePath}
	} else if store, err = ipam.NewKubeStore(rc); err != nil {
		return nil, nil, err
	}
	return store, cluster, nil
}

type gcReleaseJSON struct {
	Address     string `json:"address"`
	Network     string `json:"network"`
	Block       string `json:"block"`
	BlockNode   string `json:"block_node"`
	Pod         string `json:"pod,omitempty"`
	PodUID      string `json:"pod_uid,omitempty"`
	ContainerID string `json:"container_id"`
	IfName      string `json:"ifname"`
	Node        string `json:"node,omitempty"`
	Reason      string `json:"reason"`
}

type gcReportJSON struct {
	DryRun        bool            `json:"dry_run"`
	Network       string          `json:"network,omitempty"`
	Blocks        int             `json:"blocks"`
	Allocations   int             `json:"allocations"`
	Kept          int             `json:"kept"`
	Young         int             `json:"young"`
	Reserved      int             `json:"reserved"`
	Released      []gcReleaseJSON `json:"released"`
	DeletedBlocks []string        `json:"deleted_blocks"`
	Error         string          `json:"error,omitempty"`
}

func writeGCJSON(s streams, rep gc.Report, dryRun bool, network string, runErr error) error {
	j := gcReportJSON{DryRun: dryRun, Network: network, Blocks: rep.Blocks, Allocations: rep.Allocations, Kept: rep.Kept, Young: rep.Young, Reserved: rep.Reserved,
		Released: []gcReleaseJSON{}, DeletedBlocks: append([]string{}, rep.DeletedBlocks...)}
	for _, r := range rep.Released {
		rj := gcReleaseJSON{Address: r.Address, Network: r.Network, Block: r.Block, BlockNode: r.BlockNode,
			PodUID: r.Holder.PodUID, ContainerID: r.Holder.ContainerID, IfName: r.Holder.IfName, Node: r.Holder.Node, Reason: r.Reason}
		if r.Holder.PodName != "" {
			rj.Pod = r.Holder.PodNamespace + "/" + r.Holder.PodName
		}
		j.Released = append(j.Released, rj)
	}
	if runErr != nil {
		j.Error = runErr.Error()
	}
	return textout.WriteJSON(s.out, j)
}
