package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rdmanet/rdmanet/internal/ipam/gc"
)

// gcMetrics are the IPAM GC's metrics, served with controller-runtime's on
// --metrics-addr. Labels are bounded: reason and source are fixed sets.
var gcMetrics = struct {
	released      *prometheus.CounterVec
	passes        *prometheus.CounterVec
	latency       prometheus.Histogram
	deletedBlocks prometheus.Counter
	labelPatches  *prometheus.CounterVec
}{
	released: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rdmanet_controller_ipam_released_total",
		Help: "IPAM addresses released, by reason (pod_gone, pod_done, pod_replaced, stale_sandbox, node_gone) and source (event: a pod seen deleted or terminal; sweep: the periodic full pass).",
	}, []string{"reason", "source"}),
	passes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rdmanet_controller_ipam_passes_total",
		Help: "IPAM GC passes, by source (event, sweep) and result (ok, error). An event pass releases every queued pod with one block list.",
	}, []string{"source", "result"}),
	latency: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rdmanet_controller_ipam_release_latency_seconds",
		Help:    "From the controller seeing a pod deleted or terminal to its address released.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}),
	deletedBlocks: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rdmanet_controller_ipam_deleted_blocks_total",
		Help: "Empty IPAM blocks of deleted nodes deleted by sweeps.",
	}),
	labelPatches: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rdmanet_controller_node_label_patches_total",
		Help: "Patches of nodes' rdmanet.io/ labels, by result (ok, error).",
	}, []string{"result"}),
}

func init() {
	metrics.Registry.MustRegister(gcMetrics.released, gcMetrics.passes, gcMetrics.latency, gcMetrics.deletedBlocks, gcMetrics.labelPatches)
}

// reasonLabel is the metric label of a gc reason.
func reasonLabel(reason string) string {
	switch reason {
	case gc.ReasonPodGone:
		return "pod_gone"
	case gc.ReasonPodDone:
		return "pod_done"
	case gc.ReasonPodReplaced:
		return "pod_replaced"
	case gc.ReasonStale:
		return "stale_sandbox"
	case gc.ReasonNodeGone:
		return "node_gone"
	case gc.ReasonPodNodeGone:
		return "pod_node_gone"
	}
	return "other"
}
