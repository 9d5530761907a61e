// Package metrics is the rdmanet daemon's Prometheus metrics: DEL attempts
// per delegate (first DELs, rollbacks and retries of pending DELs), pending
// records, releases and recovered panics. Only rdmanet-daemon links it: the
// per-call CNI binaries (rdmanet, rdmanet-direct) stay free of the client
// library's initialisation.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/plugind"
)

// Metrics implements meta.Observer on a registry of its own.
type Metrics struct {
	Registry    *prometheus.Registry
	delAttempts *prometheus.CounterVec
	pending     prometheus.Gauge
	released    prometheus.Counter
	panics      *prometheus.CounterVec
	pluginCalls *prometheus.HistogramVec
}

var (
	_ meta.Observer    = (*Metrics)(nil)
	_ plugind.Observer = (*Metrics)(nil)
)

// New registers the daemon's metrics (and the Go and process collectors).
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		delAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "delegate_del_attempts_total",
			Help: "DELs of one delegate network of a container, by phase (del: the runtime's DEL; rollback: a failed ADD undoing itself; retry: a DEL that an earlier one left pending) and result (ok, error).",
		}, []string{"phase", "result"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "pending_dels",
			Help: "Containers whose DEL left delegates behind that are still being retried (as of the last retry pass).",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "pending_dels_released_total",
			Help: "Pending DELs completed by a retry: every delegate removed, their resources (VFs, addresses) released.",
		}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "panics_recovered_total",
			Help: "Panics recovered in the daemon, each turned into the failing call's CNI error (or a retry pass's failure).",
		}, []string{"where"}),
		pluginCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdmanet", Subsystem: "plugin", Name: "call_duration_seconds",
			Help:    "Calls exec'd rdmanet plugins (sriov, rdma, rdmanet-ipam) forwarded to the plugin socket, by plugin, command, path (daemon: run in the daemon; declined: the plugin ran it itself; error: unreadable request) and result (ok, error), from request to answer.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"plugin", "command", "path", "result"}),
	}
	m.Registry.MustRegister(m.delAttempts, m.pending, m.released, m.panics, m.pluginCalls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry (for /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

func (m *Metrics) DelAttempt(a meta.DelAttempt) {
	result := "ok"
	if a.Err != nil {
		result = "error"
	}
	m.delAttempts.WithLabelValues(a.Phase, result).Inc()
}

func (m *Metrics) Released(string) { m.released.Inc() }

func (m *Metrics) PendingRecords(n int) { m.pending.Set(float64(n)) }

// Panic counts by kind of place: a call's verb or a background job.
func (m *Metrics) Panic(where string) {
	kind := "call"
	if where == "rdmanet daemon: DEL retry" {
		kind = "retry"
	}
	m.panics.WithLabelValues(kind).Inc()
}

// PluginCall observes one forwarded plugin call.
func (m *Metrics) PluginCall(plugin, command, path, result string, d time.Duration) {
	m.pluginCalls.WithLabelValues(plugin, command, path, result).Observe(d.Seconds())
}
