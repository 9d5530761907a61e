// Command bench-dra measures GPU+NIC PCIe alignment (issue 16, "Measured")
// on a simulated cluster of 8-GPU nodes (test/dragpu.NewPairedNode: per
// PCIe root one H100 and one ConnectX-7 with VFs, 8 roots over 2 NUMA
// nodes): a mix of 1 GPU + 1 NIC and 4 GPU + 4 NIC training pods in the
// seed's random order, three ways:
//
//   - dra: rdmanet's DRA path, for real. kube-apiserver,
//     kube-controller-manager (resourceclaim controller) and kube-scheduler
//     from .tools/bin; the nodes exist as slices only (GPUs from test/dragpu,
//     VFs from rdmanet's dra.Publisher, both with the standard pcieRoot);
//     the pods take claims shaped like examples/dra (1+1 with one pcieRoot
//     constraint; 4+4 as four gpu-i/nic-i pairs with one constraint each)
//     and kube-scheduler allocates them.
//   - dp_single_numa: the device-plugin path with kubelet's topology
//     manager policy single-numa-node, and
//   - dp_none: the same with policy none (kubelet's default). Both are a
//     model of kube-scheduler's placement and kubelet v1.37.2's admission
//     and device manager (deviceplugin.go says what and why), calling
//     rdmanet's real GetPreferredAllocation.
//
// It prints progress on stderr and ONE summary line on stdout:
//
//	bench-dra: nodes=8 pods=80 dra_aligned=100.0% dra_scheduled=… dra_wall_s=… dp_single_numa_aligned=…% … seed=1
//
// Aligned share = aligned NIC allocations / NIC allocations of the
// scheduled pods (align.go). No timed assertions. Run it with
// `make bench-dra`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	nodes := flag.Int("nodes", 8, "simulated 8-GPU nodes")
	pairs := flag.Int("gpus-per-node", 8, "GPU+NIC PCIe roots per node (1..8)")
	vfs := flag.Int("vfs", 2, "VFs per NIC")
	small := flag.Int("pods1", 64, "pods of 1 GPU + 1 NIC")
	large := flag.Int("pods4", 16, "pods of -large-gpus GPUs + as many NICs")
	largeGPUs := flag.Int("large-gpus", 4, "GPUs (and NICs) of a large pod")
	seed := flag.Uint64("seed", 1, "random seed of the pod order (and of the device-plugin model's map order and ties)")
	settle := flag.Duration("settle", 10*time.Second, "DRA: how long every pod's verdict must stay unchanged before the run ends")
	timeout := flag.Duration("timeout", 5*time.Minute, "DRA: give up waiting for verdicts after this long")
	keepLog := flag.String("scheduler-log", "", "DRA: copy kube-scheduler's log (--v=2) to this file")
	skipDRA := flag.Bool("skip-dra", false, "run only the device-plugin model (no API server)")
	flag.Parse()
	if err := run(*nodes, *pairs, *vfs, *small, *large, *largeGPUs, *seed, *settle, *timeout, *keepLog, *skipDRA); err != nil {
		fmt.Fprintln(os.Stderr, "bench-dra:", err)
		os.Exit(1)
	}
}

func run(nNodes, pairs, vfs, small, large, largeGPUs int, seed uint64, settle, timeout time.Duration, keepLog string, skipDRA bool) error {
	if largeGPUs < 1 || largeGPUs > pairs {
		return fmt.Errorf("-large-gpus=%d: want 1..%d", largeGPUs, pairs)
	}
	dir, err := os.MkdirTemp("", "bench-dra-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nodes, err := newNodes(dir, nNodes, pairs, vfs)
	if err != nil {
		return err
	}
	pods := podMix(small, large, largeGPUs, seed)
	demand := small + large*largeGPUs
	fmt.Fprintf(os.Stderr, "bench-dra: %d nodes x %d GPUs = %d GPUs; %d pods want %d GPUs (seed %d)\n",
		nNodes, pairs, nNodes*pairs, len(pods), demand, seed)

	var dp []dpResult
	for _, policy := range []string{policySingleNUMA, policyNone} {
		r, err := runDP(nodes, pods, policy, seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench-dra: device plugins, topology manager %s (model of kubelet v1.37.2): %d scheduled, %d pending, %d rejected by kubelet, NICs aligned %s (%d/%d), pods fully aligned %d\n",
			policy, r.scheduled, r.pending, r.rejected, r.nics, r.nics.aligned, r.nics.total, r.alignedPods)
		dp = append(dp, r)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "bench-dra: nodes=%d gpus=%d pods=%d (%dx1+%dx%d, %d GPUs)", nNodes, nNodes*pairs, len(pods), small, large, largeGPUs, demand)
	if !skipDRA {
		ctx := context.Background()
		r, err := runDRA(ctx, nodes, pods, largeGPUs, settle, timeout, keepLog, os.Stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench-dra: DRA (real kube-scheduler): %d scheduled, %d unschedulable, %d SchedulerError, %d undecided, %d left out although a node fit, NIC pairs aligned %s (%d/%d), %d allocator timeouts logged; half the scheduled pods bound after %.1fs, the last after %.1fs, every verdict in after %.1fs\n",
			r.scheduled, r.unschedulable, r.schedErrors, r.undecided, r.pendingFit, r.pairs, r.pairs.aligned, r.pairs.total, r.timeouts, r.medianBound.Seconds(), r.lastBound.Seconds(), r.wall.Seconds())
		fmt.Fprintf(&b, " dra_aligned=%s dra_scheduled=%d/%d dra_unschedulable=%d dra_sched_errors=%d dra_left_with_fit=%d dra_alloc_timeouts=%d dra_wall_s=%.1f",
			r.pairs, r.scheduled, len(pods), r.unschedulable, r.schedErrors, r.pendingFit, r.timeouts, r.wall.Seconds())
		if r.undecided > 0 || r.timedOut {
			fmt.Fprintf(&b, " dra_undecided=%d", r.undecided)
		}
	}
	for _, r := range dp {
		key := "dp_none"
		if r.policy == policySingleNUMA {
			key = "dp_single_numa"
		}
		fmt.Fprintf(&b, " %s_aligned=%s %s_scheduled=%d/%d", key, r.nics, key, r.scheduled, len(pods))
		if r.policy == policySingleNUMA {
			fmt.Fprintf(&b, " %s_rejected=%d", key, r.rejected)
		}
	}
	fmt.Fprintf(&b, " dp=model-kubelet-v1.37.2 seed=%d", seed)
	fmt.Println(b.String())
	return nil
}
