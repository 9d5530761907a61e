package controller

// The GUID pool's subnet-manager hook on GC release (issue 28). GUIDs are
// IPAM allocations in the networks infiniband-guid/<pool>; the node's
// ib-sriov DEL runs the pool's hook when it frees one. A pod that is gone
// without a DEL (deleted while its node was down, node lost) has its GUID
// freed by this GC instead, and the same hook runs here, in the
// controller, with the release event, before the GUID is freed:
//
//   - fail closed: a GUID is free for another pod only after the hook
//     succeeded. While the fabric manager may still hold it in the old
//     pod's partition, handing it to a new pod would put that pod into a
//     partition it was never meant to join. A failing hook keeps the GUID
//     allocated to the gone pod (gc.Report.Held), is logged, counted
//     (rdmanet_controller_guid_hook_failures_total) and reported as a
//     Warning Event on the node, and is retried: by the event pass with its
//     backoff (1 s doubling to 30 s) and by every sweep, until it succeeds.
//     The pod's IP addresses are released meanwhile; only the GUID waits.
//   - the PKey and network come from the pod's network-status annotation
//     (the "infiniband" extension, internal/devinfo), which the cache keeps
//     for IB pods only. A pod deleted while no controller watched (released
//     by a sweep) has none: the hook then gets an empty PKey and must
//     remove the GUID from every partition (examples/infiniband/sm-hook.sh
//     does).

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/ipam/gc"
)

// networkStatusAnnotation is Multus' network-status annotation.
const networkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"

var guidHookMetrics = struct {
	runs *prometheus.CounterVec
}{
	runs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rdmanet_controller_guid_hook_runs_total",
		Help: "Runs of the GUID pool's subnet-manager hook for GUIDs the IPAM GC releases, by result (ok, error). A failed run keeps the GUID allocated and is retried.",
	}, []string{"result"}),
}

func init() { metrics.Registry.MustRegister(guidHookMetrics.runs) }

// LoadGUIDHooks reads GUID pool config files (the nodes' format,
// docs/infiniband.md) and returns the hook of each pool that has one, by
// its IPAM network (infiniband-guid/<name>). Two files of one pool are
// refused.
func LoadGUIDHooks(paths []string) (map[string]guidpool.HookRunner, []string, error) {
	hooks := map[string]guidpool.HookRunner{}
	from := map[string]string{}
	var warnings []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--guid-pool-config=%s: %w; fix: mount the nodes' GUID pool config (guid-pool.json) into the controller", p, err)
		}
		cfg, err := guidpool.Parse(p, b)
		if err != nil {
			return nil, nil, fmt.Errorf("--guid-pool-config=%s: %w", p, err)
		}
		warnings = append(warnings, cfg.Warnings...)
		if prev, dup := from[cfg.Network]; dup {
			return nil, nil, fmt.Errorf("--guid-pool-config=%s: pool %q is also configured by %s; fix: give each pool's config once", p, cfg.Name, prev)
		}
		from[cfg.Network] = p
		if len(cfg.Hook) == 0 {
			warnings = append(warnings, fmt.Sprintf("--guid-pool-config=%s: pool %q has no hook: its GUIDs are released by the GC without one", p, cfg.Name))
			continue
		}
		hooks[cfg.Network] = guidpool.ExecHook{Command: cfg.Hook, Timeout: cfg.HookTimeout}
	}
	return hooks, warnings, nil
}

// keepIBStatus is the part of a pod's annotations the cache keeps: the
// network-status of a pod with InfiniBand attachments (for the hook's PKey).
func keepIBStatus(p *corev1.Pod) map[string]string {
	s, ok := p.Annotations[networkStatusAnnotation]
	if !ok || !strings.Contains(s, `"infiniband"`) {
		return nil
	}
	return map[string]string{networkStatusAnnotation: s}
}

// rememberGUIDs keeps what p's network-status says about its GUIDs until
// the pod's release pass is done (forgetGUIDs).
func (g *IPAMGC) rememberGUIDs(p *corev1.Pod, ref gc.PodRef) {
	if len(g.GUIDHooks) == 0 {
		return
	}
	guids := devinfo.PodGUIDs(p.Annotations[networkStatusAnnotation])
	if len(guids) == 0 {
		return
	}
	if g.guids == nil {
		g.guids = map[gc.PodRef]map[string]devinfo.PodGUID{}
	}
	g.guids[ref] = guids
}

// forgetGUIDs drops the GUIDs of pods whose release pass succeeded.
func (g *IPAMGC) forgetGUIDs(refs map[gc.PodRef]queued) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for ref := range refs {
		delete(g.guids, ref)
	}
}

// beforeRelease is the GC passes' gc.Options.BeforeRelease: for a GUID of
// a pool with a hook, run the hook with the release event; its error keeps
// the GUID allocated.
func (g *IPAMGC) beforeRelease(ctx context.Context, r gc.Release) error {
	hook, ok := g.GUIDHooks[r.Network]
	if !ok {
		return nil
	}
	a, err := netip.ParseAddr(r.Address)
	if err != nil {
		return nil
	}
	guid, ok := guidpool.FromAddr(a)
	if !ok {
		return nil
	}
	ref := gc.PodRef{Namespace: r.Holder.PodNamespace, Name: r.Holder.PodName, UID: r.Holder.PodUID}
	g.mu.Lock()
	info, known := g.guids[ref][guid.String()]
	g.mu.Unlock()
	node := cmp.Or(r.Holder.Node, r.BlockNode)
	e := guidpool.HookEvent{Action: guidpool.ActionRelease, GUID: guid, PKey: info.PKey, PodNamespace: ref.Namespace, PodName: ref.Name,
		PodUID: ref.UID, Network: info.Network, Node: node, Reason: r.Reason}
	if err := hook.Run(ctx, e); err != nil {
		guidHookMetrics.runs.WithLabelValues("error").Inc()
		g.Log.Error(err, "GUID pool hook failed: the GUID stays allocated to the gone pod and is retried (it must not be reused while the fabric manager may still hold it)",
			"guid", guid.String(), "pkey", info.PKey, "pod", ref.Namespace+"/"+ref.Name, "podUID", ref.UID, "node", node, "pool", r.Network)
		if g.Recorder != nil && node != "" {
			g.Recorder.Eventf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, nil, corev1.EventTypeWarning, "GUIDReleaseHookFailed", "ReleaseGUID",
				"GUID %s of gone pod %s/%s (pkey %q) kept allocated: the GUID pool hook failed (%v); retrying", guid, ref.Namespace, ref.Name, info.PKey, err)
		}
		return fmt.Errorf("GUID %s: %w", guid, err)
	}
	guidHookMetrics.runs.WithLabelValues("ok").Inc()
	g.Log.Info("ran the GUID pool hook for a GUID the GC releases", "guid", guid.String(), "pkey", info.PKey, "pkeyKnown", known,
		"pod", ref.Namespace+"/"+ref.Name, "node", node, "pool", r.Network, "reason", r.Reason)
	return nil
}
