// Package gc releases IPAM addresses whose pod no longer exists and deletes
// the empty blocks of nodes that no longer exist. It is a library: the
// controller hosts it, `rdmanet-ipam gc` and `kubectl rdma ipam gc` call Run.
package gc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Pod is what GC needs to know about a live pod.
type Pod struct {
	UID      string
	Terminal bool // phase Succeeded or Failed: its sandbox is gone
	// IPs reported by the pod's network-status annotation (nil when absent).
	IPs map[netip.Addr]bool
}

// Cluster answers which pods and nodes exist.
type Cluster interface {
	// Pods returns the existing pods keyed by "namespace/name".
	Pods(ctx context.Context) (map[string]Pod, error)
	// Nodes returns the names of the existing nodes.
	Nodes(ctx context.Context) (map[string]bool, error)
}

// Options configure one GC run.
type Options struct {
	Store   ipam.Store
	Cluster Cluster
	// Network limits the run to one IPAM network ("" = all).
	Network string
	// DryRun reports what would be released without writing.
	DryRun bool
	// MaxAttempts bounds conflict retries per block (0 = 20).
	MaxAttempts int
}

// Release is one released (or, in a dry run, releasable) address.
type Release struct {
	Block     string
	Address   string
	Holder    v1alpha1.Allocation
	Reason    string
	Network   string
	BlockNode string
}

// Report is the outcome of a run.
type Report struct {
	Blocks        int
	Allocations   int
	Released      []Release
	DeletedBlocks []string
	// Kept counts allocations that stay (live pod, or no pod identity on a live node).
	Kept int
}

// Reasons.
const (
	ReasonPodGone     = "pod no longer exists"
	ReasonPodReplaced = "pod was recreated (different UID)"
	ReasonPodDone     = "pod has terminated"
	ReasonStale       = "pod's network-status lists another address for this interface"
	ReasonNodeGone    = "node no longer exists (allocation has no pod identity)"
)

// Run performs one garbage collection pass.
//
// Order matters: blocks are listed before pods, so every allocation examined
// was written before the pod list was taken. A pod that exists then is seen.
// Releases are applied with compare-and-swap updates; on conflict the block
// is re-read and only the same (address, holder) pairs are removed, so an
// allocation made after the snapshot is never touched.
func Run(ctx context.Context, opts Options) (Report, error) {
	var rep Report
	if opts.Store == nil || opts.Cluster == nil {
		return rep, errors.New("rdmanet-ipam gc: Store and Cluster are required")
	}
	blocks, err := opts.Store.List(ctx, ipam.Pool{}, "")
	if err != nil {
		return rep, fmt.Errorf("rdmanet-ipam gc: list blocks: %w", err)
	}
	pods, err := opts.Cluster.Pods(ctx)
	if err != nil {
		return rep, fmt.Errorf("rdmanet-ipam gc: list pods: %w", err)
	}
	nodes, err := opts.Cluster.Nodes(ctx)
	if err != nil {
		return rep, fmt.Errorf("rdmanet-ipam gc: list nodes: %w", err)
	}
	// Allocations per (pool, pod UID, ifname), for the stale-sandbox rule.
	type podIf struct{ pool, uid, ifName string }
	count := map[podIf]int{}
	for i := range blocks {
		b := &blocks[i]
		for _, a := range b.Spec.Allocations {
			if a.PodUID != "" {
				count[podIf{b.Labels[v1alpha1.LabelPool], a.PodUID, a.IfName}]++
			}
		}
	}
	slices.SortFunc(blocks, func(x, y v1alpha1.IPAMBlock) int { return cmpStr(x.Name, y.Name) })
	var errs []error
	for i := range blocks {
		b := &blocks[i]
		if opts.Network != "" && b.Spec.Network != opts.Network {
			continue
		}
		rep.Blocks++
		var rel []Release
		for addr, a := range b.Spec.Allocations {
			rep.Allocations++
			reason := ""
			if a.PodName != "" {
				p, ok := pods[a.PodNamespace+"/"+a.PodName]
				switch {
				case !ok:
					reason = ReasonPodGone
				case a.PodUID != "" && p.UID != a.PodUID:
					reason = ReasonPodReplaced
				case p.Terminal:
					reason = ReasonPodDone
				case p.IPs != nil && count[podIf{b.Labels[v1alpha1.LabelPool], a.PodUID, a.IfName}] > 1 && !p.IPs[netip.MustParseAddr(addr)]:
					reason = ReasonStale
				}
			} else if node := firstNonEmpty(a.Node, b.Spec.Node); !nodes[node] {
				reason = ReasonNodeGone
			}
			if reason == "" {
				rep.Kept++
				continue
			}
			rel = append(rel, Release{Block: b.Name, Address: addr, Holder: a, Reason: reason, Network: b.Spec.Network, BlockNode: b.Spec.Node})
		}
		slices.SortFunc(rel, func(x, y Release) int { return cmpStr(x.Address, y.Address) })
		nodeGone := !nodes[b.Spec.Node]
		if opts.DryRun {
			rep.Released = append(rep.Released, rel...)
			if nodeGone && len(rel) == len(b.Spec.Allocations) {
				rep.DeletedBlocks = append(rep.DeletedBlocks, b.Name)
			}
			continue
		}
		done, deleted, err := apply(ctx, opts, b, rel, nodeGone)
		rep.Released = append(rep.Released, done...)
		if deleted {
			rep.DeletedBlocks = append(rep.DeletedBlocks, b.Name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rdmanet-ipam gc: block %s: %w", b.Name, err))
		}
	}
	return rep, errors.Join(errs...)
}

// apply removes rel from b (re-reading b on conflicts) and deletes b when it
// is empty and its node is gone.
func apply(ctx context.Context, opts Options, b *v1alpha1.IPAMBlock, rel []Release, nodeGone bool) ([]Release, bool, error) {
	maxAttempts := opts.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 20
	}
	var released []Release
	cur := b.DeepCopy()
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			if cur, err = opts.Store.Get(ctx, b.Name); err != nil {
				if errors.Is(err, ipam.ErrNotFound) {
					return released, false, nil
				}
				return released, false, err
			}
		}
		var now, rest []Release
		for _, r := range rel {
			if a, ok := cur.Spec.Allocations[r.Address]; ok && a == r.Holder {
				delete(cur.Spec.Allocations, r.Address)
				now = append(now, r)
			} else {
				rest = append(rest, r)
			}
		}
		if len(now) > 0 {
			upd, err := opts.Store.Update(ctx, cur)
			if errors.Is(err, ipam.ErrConflict) {
				continue
			}
			if err != nil {
				return released, false, err
			}
			cur, released, rel = upd, append(released, now...), rest
		}
		if nodeGone && len(cur.Spec.Allocations) == 0 {
			err = opts.Store.Delete(ctx, cur)
			if errors.Is(err, ipam.ErrConflict) {
				continue
			}
			return released, err == nil, err
		}
		return released, false, nil
	}
	return released, false, fmt.Errorf("gave up after %d conflicting attempts: %w", maxAttempts, ipam.ErrConflict)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
