// Package gc releases IPAM addresses whose pod no longer exists and deletes
// the empty blocks of nodes that no longer exist. It is a library: the
// controller hosts it, `rdmanet-ipam gc` and `kubectl rdma ipam gc` call Run.
package gc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Pod is what GC needs to know about a live pod.
type Pod struct {
	UID      string
	Terminal bool // phase Succeeded or Failed: its sandbox is gone
	// IPs reported by the pod's network-status annotation (nil when absent).
	// The annotation is written after ADD returns, so it may lag: GC only
	// ever uses it to keep an address, never as the reason to release one.
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
	// Grace is the age (from the allocation's created time) below which an
	// allocation is never released: its pod may not be listed yet (a static
	// pod's mirror), its status not written. 0 means DefaultGrace; NoGrace
	// (any negative value) releases at any age.
	Grace time.Duration
	// Now is the clock allocation ages are measured with (nil: time.Now).
	Now func() time.Time
	// BeforeRelease, when set, is called for every allocation the pass is
	// about to release (not in a dry run), before its block is written. An
	// error keeps the allocation (counted in Kept and Held) and is returned,
	// joined, with the pass's other errors: a later pass tries again. The
	// controller runs the GUID pool's subnet-manager hook here, so a GUID is
	// free for reuse only once the fabric manager was told.
	BeforeRelease func(ctx context.Context, r Release) error
}

// DefaultGrace is the grace period of Options.Grace 0 and of the CLIs.
const DefaultGrace = 10 * time.Minute

// NoGrace disables the grace period.
const NoGrace time.Duration = -1

func (o Options) grace() time.Duration {
	switch {
	case o.Grace == 0:
		return DefaultGrace
	case o.Grace < 0:
		return 0
	}
	return o.Grace
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
	// Kept counts allocations that stay (live pod, no pod identity on a live
	// node, younger than the grace period, reservations).
	Kept int
	// Young counts the kept allocations younger than the grace period that
	// a rule would otherwise have released.
	Young int
	// Reserved counts reservations (gateways), which GC always keeps.
	Reserved int
	// Held counts the allocations kept because Options.BeforeRelease failed.
	Held int
}

// Reasons.
const (
	ReasonPodGone     = "pod no longer exists"
	ReasonPodReplaced = "pod was recreated (different UID)"
	ReasonPodDone     = "pod has terminated"
	ReasonStale       = "a newer sandbox of the pod holds another address for this interface"
	ReasonNodeGone    = "node no longer exists (allocation has no pod identity)"
	// ReasonPodNodeGone: the pod's Node was deleted and did not come back
	// within the quarantine Kubernetes' pod GC also waits (its machine is
	// gone; the pod GC deletes the pod at that point).
	ReasonPodNodeGone = "the pod's node was deleted and did not come back"
)

// Run performs one garbage collection pass.
//
// Order matters: blocks are listed before pods, so every allocation examined
// was written before the pod list was taken. A pod that exists then is seen.
// Releases are applied with compare-and-swap updates; on conflict the block
// is re-read and only the same (address, holder) pairs are removed, so an
// allocation made after the snapshot is never touched.
//
// An allocation is decided by its own pod identity (namespace/name, UID) and
// container (sandbox) ID against the live pod, and by its age; the pod's
// network-status, which is written only after ADD returns, can keep an
// address but never releases one. No allocation younger than the grace
// period is released, and reservations (gateways) are always kept.
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
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	grace := opts.grace()
	newest := newestSandboxes(blocks)
	decide := func(b *v1alpha1.IPAMBlock, addr string, a v1alpha1.Allocation) (string, bool) {
		reason := ""
		if a.PodName != "" {
			p, ok := pods[a.PodNamespace+"/"+a.PodName]
			ip, _ := netip.ParseAddr(addr)
			switch {
			case !ok:
				reason = ReasonPodGone
			case a.PodUID != "" && p.UID != a.PodUID:
				reason = ReasonPodReplaced
			case p.Terminal:
				reason = ReasonPodDone
			case a.PodUID != "" && p.IPs[ip]:
				// The status (possibly lagging) still lists it: keep.
			case a.PodUID != "":
				if cid, ok := newest[sandboxKey(b, ip, a)]; ok && cid != a.ContainerID {
					reason = ReasonStale
				}
			}
		} else if node := cmp.Or(a.Node, b.Spec.Node); !nodes[node] {
			reason = ReasonNodeGone
		}
		if reason != "" && young(a, now, grace) {
			rep.Young++
			reason = ""
		}
		return reason, reason != ""
	}
	nodeGone := func(b *v1alpha1.IPAMBlock) bool { return !nodes[b.Spec.Node] }
	err = walk(ctx, opts, blocks, &rep, decide, nodeGone)
	return rep, err
}

// walk is the pass Run and ReleasePods share over the blocks they listed:
// in block name order, for the blocks of opts.Network, it asks decide about
// every allocation but the reservations (kept always) and releases those
// decide answers true for, with the answered reason, through apply's
// compare-and-swap updates (opts.DryRun: reports them, writes nothing). A
// block nodeGone reports (nil: none) is deleted once it is empty. It adds to
// rep's counts, Released and DeletedBlocks, and returns the blocks' errors,
// joined.
func walk(ctx context.Context, opts Options, blocks []v1alpha1.IPAMBlock, rep *Report,
	decide func(b *v1alpha1.IPAMBlock, addr string, a v1alpha1.Allocation) (reason string, release bool),
	nodeGone func(b *v1alpha1.IPAMBlock) bool) error {
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
			if a.Reserved != "" {
				rep.Kept++
				rep.Reserved++
				continue
			}
			reason, release := decide(b, addr, a)
			if !release {
				rep.Kept++
				continue
			}
			r := Release{Block: b.Name, Address: addr, Holder: a, Reason: reason, Network: b.Spec.Network, BlockNode: b.Spec.Node}
			if opts.BeforeRelease != nil && !opts.DryRun {
				if err := opts.BeforeRelease(ctx, r); err != nil {
					rep.Kept++
					rep.Held++
					errs = append(errs, fmt.Errorf("rdmanet-ipam gc: block %s: %s of pod %s/%s kept: %w", b.Name, addr, a.PodNamespace, a.PodName, err))
					continue
				}
			}
			rel = append(rel, r)
		}
		gone := nodeGone != nil && nodeGone(b)
		if len(rel) == 0 && !gone {
			continue // nothing to write
		}
		slices.SortFunc(rel, func(x, y Release) int { return cmpStr(x.Address, y.Address) })
		if opts.DryRun {
			rep.Released = append(rep.Released, rel...)
			if gone && len(rel) == len(b.Spec.Allocations) {
				rep.DeletedBlocks = append(rep.DeletedBlocks, b.Name)
			}
			continue
		}
		done, deleted, err := apply(ctx, opts, b, rel, gone)
		rep.Released = append(rep.Released, done...)
		if deleted {
			rep.DeletedBlocks = append(rep.DeletedBlocks, b.Name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rdmanet-ipam gc: block %s: %w", b.Name, err))
		}
	}
	return errors.Join(errs...)
}

// podInterface identifies one interface of one pod in one network and
// address family: it holds one address per sandbox.
type podInterface struct {
	network, uid, ifName string
	is4                  bool
}

func sandboxKey(b *v1alpha1.IPAMBlock, ip netip.Addr, a v1alpha1.Allocation) podInterface {
	return podInterface{network: b.Spec.Network, uid: a.PodUID, ifName: a.IfName, is4: ip.Is4()}
}

// newestSandboxes returns, per pod interface held by more than one sandbox
// (container ID), the container ID of the newest allocation: the current
// sandbox, since kubelet runs one sandbox of a pod at a time and creates a
// new one only after the old one stopped. A pod interface whose allocations
// cannot be ordered (a created time missing, or a tie) is left out: none of
// them is stale.
func newestSandboxes(blocks []v1alpha1.IPAMBlock) map[podInterface]string {
	type best struct {
		cid     string
		at      time.Time
		tie     bool // another container has the same newest time
		unknown bool // an allocation has no created time
		several bool // more than one container
	}
	seen := map[podInterface]*best{}
	for i := range blocks {
		b := &blocks[i]
		for addr, a := range b.Spec.Allocations {
			ip, err := netip.ParseAddr(addr)
			if a.PodUID == "" || a.Reserved != "" || err != nil {
				continue
			}
			k := sandboxKey(b, ip, a)
			at, err := time.Parse(time.RFC3339Nano, a.Created)
			cur := seen[k]
			if cur == nil {
				seen[k] = &best{cid: a.ContainerID, at: at, unknown: err != nil}
				continue
			}
			cur.unknown = cur.unknown || err != nil
			if a.ContainerID == cur.cid {
				continue
			}
			cur.several = true
			switch {
			case at.After(cur.at):
				cur.cid, cur.at, cur.tie = a.ContainerID, at, false
			case at.Equal(cur.at):
				cur.tie = true
			}
		}
	}
	out := map[podInterface]string{}
	for k, v := range seen {
		if v.several && !v.tie && !v.unknown {
			out[k] = v.cid
		}
	}
	return out
}

// young reports whether a was created less than grace ago. An allocation
// without a readable created time (written by an older release) is old.
func young(a v1alpha1.Allocation, now time.Time, grace time.Duration) bool {
	at, err := time.Parse(time.RFC3339Nano, a.Created)
	return err == nil && now.Sub(at) < grace
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

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
