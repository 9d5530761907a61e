package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
)

// IPAMGC is the leader's IPAM garbage collector. It runs as a manager
// Runnable that needs leader election:
//
//   - events: a pod seen deleted, or turning Succeeded/Failed, is queued by
//     (namespace, name, UID); the worker releases every queued pod's
//     allocations with one gc.ReleasePods pass (one block list per batch,
//     whatever the number of pods), at any age. Failed passes are retried
//     with backoff (1 s doubling to 30 s).
//   - node loss: a Node seen deleted that is still absent from the API
//     server NodeQuarantine later (a live, uncached check; when it cannot be
//     read, nothing is released and it is checked again) has the pods bound
//     to it queued with gc.ReasonPodNodeGone. Kubernetes' pod GC deletes
//     those pods after the same quarantine but polls every 20 s; this
//     releases their addresses when the quarantine ends (issue 26: within
//     60 s of a crash). A kubelet that is alive re-registers its Node well
//     within the quarantine, and then nothing is released.
//   - sweeps: gc.Run on start and every SweepInterval, with the library's
//     grace period and rules (pods deleted while no controller watched,
//     recreated pods, stale sandboxes, blocks of deleted nodes). It lists pods
//     from the API server itself, not the cache, and fails closed: when the
//     pod list cannot be read nothing is released.
type IPAMGC struct {
	Store   ipam.Store
	Cluster gc.Cluster
	// Informers is the manager's cache; the pod informer feeds the queue.
	Informers     cache.Informers
	SweepInterval time.Duration
	// Grace of the sweep (gc.Options.Grace).
	Grace time.Duration
	Log   logr.Logger
	// Now is the clock of latency measurements (nil: time.Now).
	Now func() time.Time
	// NodeQuarantine: see node loss above (0: DefaultNodeQuarantine).
	NodeQuarantine time.Duration
	// GUIDHooks are the GUID pools' subnet-manager hooks by IPAM network
	// (LoadGUIDHooks): run before the GC frees a GUID (guidhook.go).
	GUIDHooks map[string]guidpool.HookRunner
	// Recorder emits the Warning Events of failed GUID hooks (nil: none).
	Recorder events.EventRecorder

	mu      sync.Mutex
	pending map[gc.PodRef]queued
	kick    chan struct{}
	// byNode holds the live (scheduled, not terminal, not hostNetwork)
	// pods of each node, from the pod events.
	byNode map[string]map[gc.PodRef]bool
	// guids holds what the network-status of pods with GUIDs said about
	// them (PKey, network), for the hook (guidhook.go).
	guids map[gc.PodRef]map[string]devinfo.PodGUID
}

// DefaultNodeQuarantine is Kubernetes' pod GC's quarantine of orphaned
// pods (pkg/controller/podgc: 40 s).
const DefaultNodeQuarantine = 40 * time.Second

// queued is a pod waiting for its release.
type queued struct {
	reason string
	seen   time.Time // when the event arrived
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (g *IPAMGC) NeedLeaderElection() bool { return true }

func (g *IPAMGC) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// podRelease decides, for one pod event, whether the pod's addresses are
// released now: old is the pod before an update (nil for add and delete
// events), cur the pod after it (or the deleted pod). It answers the pod's
// identity and the gc reason, or ok false.
//
// Released: a deleted pod, and a pod that is (add) or becomes (update)
// Succeeded or Failed. Never: a pod without a UID, a hostNetwork pod (no
// CNI call, no address), a pod never scheduled (no sandbox), a pod only
// being deleted (deletionTimestamp set: its sandbox still runs through the
// grace period; it is released when it is gone), an update of a pod that
// was already terminal (its release was queued then).
func podRelease(old, cur *corev1.Pod, deleted bool) (gc.PodRef, string, bool) {
	if cur == nil || cur.UID == "" || cur.Spec.HostNetwork || cur.Spec.NodeName == "" {
		return gc.PodRef{}, "", false
	}
	ref := gc.PodRef{Namespace: cur.Namespace, Name: cur.Name, UID: string(cur.UID)}
	switch {
	case deleted:
		return ref, gc.ReasonPodGone, true
	case !terminal(cur):
		return gc.PodRef{}, "", false
	case old != nil && terminal(old) && old.UID == cur.UID:
		return gc.PodRef{}, "", false
	}
	return ref, gc.ReasonPodDone, true
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podOf returns the pod of an informer event object, also from a tombstone.
func podOf(obj any) *corev1.Pod {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

// nodeName is the name of a Node event's object (tombstones included).
func nodeName(obj any) string {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		return n.Name
	}
	return ""
}

// enqueue queues a pod's release and wakes the worker.
func (g *IPAMGC) enqueue(old, cur *corev1.Pod, deleted bool) {
	g.track(cur, deleted)
	ref, reason, ok := podRelease(old, cur, deleted)
	if !ok {
		return
	}
	g.queue(map[gc.PodRef]string{ref: reason}, g.now())
}

// track keeps byNode current.
func (g *IPAMGC) track(p *corev1.Pod, deleted bool) {
	if p == nil || p.UID == "" || p.Spec.HostNetwork || p.Spec.NodeName == "" {
		return
	}
	ref := gc.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rememberGUIDs(p, ref)
	if g.byNode == nil {
		g.byNode = map[string]map[gc.PodRef]bool{}
	}
	pods := g.byNode[p.Spec.NodeName]
	if deleted || terminal(p) {
		delete(pods, ref)
		if len(pods) == 0 {
			delete(g.byNode, p.Spec.NodeName)
		}
		return
	}
	if pods == nil {
		pods = map[gc.PodRef]bool{}
		g.byNode[p.Spec.NodeName] = pods
	}
	pods[ref] = true
}

// queue queues releases (a pod gone outright wins over other reasons)
// and wakes the worker.
func (g *IPAMGC) queue(refs map[gc.PodRef]string, seen time.Time) {
	g.mu.Lock()
	for ref, reason := range refs {
		if _, dup := g.pending[ref]; !dup || reason == gc.ReasonPodGone {
			g.pending[ref] = queued{reason: reason, seen: seen}
		}
	}
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// nodeDeleted starts the quarantine of a deleted Node.
func (g *IPAMGC) nodeDeleted(ctx context.Context, name string) {
	q := g.NodeQuarantine
	if q <= 0 {
		q = DefaultNodeQuarantine
	}
	deleted := g.now()
	g.Log.Info("node deleted: its pods' addresses are released if it is not back after the quarantine", "node", name, "quarantine", q)
	time.AfterFunc(q, func() { g.nodeQuarantineOver(ctx, name, deleted) })
}

// quarantineMissing starts the quarantine of every node that has tracked
// pods but no Node object. A replica that starts leading replays only the
// Nodes that exist: a Node deleted while no replica led (the old leader
// crashed with the node, or lost its lease) sends no event. Called once
// the pod cache has synced. When the node list cannot be read nothing
// starts (fail closed): those pods are released when Kubernetes' pod GC
// deletes them, as without rdmanet.
func (g *IPAMGC) quarantineMissing(ctx context.Context) {
	nodes, err := g.Cluster.Nodes(ctx)
	if err != nil {
		g.Log.Error(err, "node list unreadable when starting to lead: nodes deleted before now are left to Kubernetes' pod GC")
		return
	}
	g.mu.Lock()
	var missing []string
	for name := range g.byNode {
		if !nodes[name] {
			missing = append(missing, name)
		}
	}
	g.mu.Unlock()
	sort.Strings(missing)
	for _, name := range missing {
		g.Log.Info("pods on a node that no longer exists (deleted before this replica led)", "node", name)
		g.nodeDeleted(ctx, name)
	}
}

// nodeQuarantineOver queues the pods of a Node that stayed deleted. It asks
// the API server, not the cache, and fails closed: when the node list
// cannot be read, nothing is queued and it asks again in 5 s.
func (g *IPAMGC) nodeQuarantineOver(ctx context.Context, name string, deleted time.Time) {
	if ctx.Err() != nil {
		return
	}
	nodes, err := g.Cluster.Nodes(ctx)
	if err != nil {
		g.Log.Error(err, "node quarantine over but the node list cannot be read: nothing released; asking again in 5s", "node", name)
		time.AfterFunc(5*time.Second, func() { g.nodeQuarantineOver(ctx, name, deleted) })
		return
	}
	if nodes[name] {
		g.Log.Info("deleted node is back: its pods keep their addresses", "node", name)
		return
	}
	g.mu.Lock()
	refs := map[gc.PodRef]string{}
	for ref := range g.byNode[name] {
		refs[ref] = gc.ReasonPodNodeGone
	}
	delete(g.byNode, name)
	g.mu.Unlock()
	g.Log.Info("node gone after the quarantine: releasing its pods' addresses", "node", name, "pods", len(refs))
	if len(refs) > 0 {
		g.queue(refs, deleted)
	}
}

// take empties the queue.
func (g *IPAMGC) take() map[gc.PodRef]queued {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.pending
	g.pending = map[gc.PodRef]queued{}
	return out
}

// requeue puts back what a failed pass did not release (newer events win).
func (g *IPAMGC) requeue(batch map[gc.PodRef]queued) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for ref, q := range batch {
		if _, ok := g.pending[ref]; !ok {
			g.pending[ref] = q
		}
	}
}

// Start implements manager.Runnable: it runs while this replica leads.
func (g *IPAMGC) Start(ctx context.Context) error {
	if g.Store == nil || g.Cluster == nil || g.Informers == nil {
		return errors.New("ipam gc: Store, Cluster and Informers are required")
	}
	interval := g.SweepInterval
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	g.mu.Lock()
	g.pending = map[gc.PodRef]queued{}
	g.kick = make(chan struct{}, 1)
	g.mu.Unlock()

	// The handler is registered before the informer's first list (when
	// this call creates the informer), so no pod deleted after that list
	// is missed; registering on a running informer replays an add for
	// every cached pod, so terminal pods of before this replica led are
	// released too. Pods deleted while no replica watched are the sweep's.
	inf, err := g.Informers.GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("ipam gc: pod informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { g.enqueue(nil, podOf(obj), false) },
		UpdateFunc: func(o, n any) { g.enqueue(podOf(o), podOf(n), false) },
		DeleteFunc: func(obj any) { g.enqueue(nil, podOf(obj), true) },
	})
	if err != nil {
		return fmt.Errorf("ipam gc: pod event handler: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	nodeInf, err := g.Informers.GetInformer(ctx, &corev1.Node{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("ipam gc: node informer: %w", err)
	}
	nodeReg, err := nodeInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if name := nodeName(obj); name != "" {
				g.nodeDeleted(ctx, name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("ipam gc: node event handler: %w", err)
	}
	defer func() { _ = nodeInf.RemoveEventHandler(nodeReg) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil // ctx ended
	}
	g.Log.Info("watching pods: addresses of deleted and terminal pods are released now", "sweepInterval", interval)
	g.quarantineMissing(ctx)

	g.sweep(ctx)
	sweeps := time.NewTicker(interval)
	defer sweeps.Stop()
	const minBackoff, maxBackoff = time.Second, 30 * time.Second
	backoff := minBackoff
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sweeps.C:
			g.sweep(ctx)
			continue
		case <-g.kick:
			if retry != nil {
				continue // a retry is scheduled: it takes the new pods too
			}
		case <-retry:
			retry = nil
		}
		if err := g.releaseQueued(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			g.Log.Error(err, "releasing the addresses of deleted and terminal pods; retrying", "in", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
	}
}

// releaseQueued releases the queued pods' addresses in one pass.
func (g *IPAMGC) releaseQueued(ctx context.Context) error {
	batch := g.take()
	if len(batch) == 0 {
		return nil
	}
	gone := make(map[gc.PodRef]string, len(batch))
	for ref, q := range batch {
		gone[ref] = q.reason
	}
	rep, err := gc.ReleasePods(ctx, gc.Options{Store: g.Store, BeforeRelease: g.beforeRelease}, gone)
	done := g.now()
	for _, r := range rep.Released {
		ref := gc.PodRef{Namespace: r.Holder.PodNamespace, Name: r.Holder.PodName, UID: r.Holder.PodUID}
		latency := done.Sub(batch[ref].seen)
		gcMetrics.released.WithLabelValues(reasonLabel(r.Reason), "event").Inc()
		gcMetrics.latency.Observe(latency.Seconds())
		g.Log.Info("released address", "address", r.Address, "network", r.Network, "block", r.Block,
			"pod", r.Holder.PodNamespace+"/"+r.Holder.PodName, "podUID", r.Holder.PodUID, "reason", r.Reason, "latency", latency)
	}
	if err != nil {
		gcMetrics.passes.WithLabelValues("event", "error").Inc()
		// ReleasePods is idempotent: retry the whole batch.
		g.requeue(batch)
		return err
	}
	gcMetrics.passes.WithLabelValues("event", "ok").Inc()
	g.forgetGUIDs(batch)
	return nil
}

// sweep runs one full gc.Run pass.
func (g *IPAMGC) sweep(ctx context.Context) {
	start := g.now()
	rep, err := gc.Run(ctx, gc.Options{Store: g.Store, Cluster: g.Cluster, Grace: g.Grace, Now: g.Now, BeforeRelease: g.beforeRelease})
	for _, r := range rep.Released {
		gcMetrics.released.WithLabelValues(reasonLabel(r.Reason), "sweep").Inc()
		g.Log.Info("released address", "address", r.Address, "network", r.Network, "block", r.Block,
			"pod", r.Holder.PodNamespace+"/"+r.Holder.PodName, "podUID", r.Holder.PodUID, "container", r.Holder.ContainerID, "reason", r.Reason)
	}
	for _, b := range rep.DeletedBlocks {
		g.Log.Info("deleted the empty block of a deleted node", "block", b)
	}
	gcMetrics.deletedBlocks.Add(float64(len(rep.DeletedBlocks)))
	if err != nil {
		if ctx.Err() == nil {
			gcMetrics.passes.WithLabelValues("sweep", "error").Inc()
			g.Log.Error(err, "IPAM sweep failed (what it released is logged above)")
		}
		return
	}
	gcMetrics.passes.WithLabelValues("sweep", "ok").Inc()
	g.Log.V(1).Info("IPAM sweep done", "blocks", rep.Blocks, "allocations", rep.Allocations, "released", len(rep.Released),
		"kept", rep.Kept, "young", rep.Young, "reserved", rep.Reserved, "deletedBlocks", len(rep.DeletedBlocks), "took", g.now().Sub(start))
}
