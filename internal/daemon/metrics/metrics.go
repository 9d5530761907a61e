// Package metrics is the rdmanet daemon's Prometheus metrics: latency of
// CNI calls, of their steps, of each delegate and each plugin call (in the
// daemon's process or exec'd), errors by reason, DEL attempts and retries,
// network-status writes and their retries, recovered panics, and the
// node's IPAM usage from its block cache. docs/metrics.md lists them all.
// Only rdmanet-daemon links it: the per-call CNI binaries (rdmanet,
// rdmanet-direct, sriov, rdma, rdmanet-ipam) stay free of the client
// library's initialisation.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/daemon/inproc"
	"github.com/rdmanet/rdmanet/internal/daemon/plugind"
	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
	"github.com/rdmanet/rdmanet/internal/ipam"
)

// Metrics implements meta.Observer (and meta.CallObserver),
// plugind.Observer and inproc.Observer on a registry of its own.
type Metrics struct {
	Registry      *prometheus.Registry
	delAttempts   *prometheus.CounterVec
	pending       prometheus.Gauge
	released      prometheus.Counter
	panics        *prometheus.CounterVec
	pluginCalls   *prometheus.HistogramVec
	calls         *prometheus.HistogramVec
	callErrors    *prometheus.CounterVec
	steps         *prometheus.HistogramVec
	delegates     *prometheus.HistogramVec
	pluginExec    *prometheus.HistogramVec
	statusWrites  *prometheus.CounterVec
	statusRetries prometheus.Counter

	// bounded label values: plugin file names and delegate types come
	// from node files and NADs; past MaxLabelValues new ones are "other"
	pluginNames, delegateTypes *boundedLabel
}

var (
	_ meta.Observer     = (*Metrics)(nil)
	_ meta.CallObserver = (*Metrics)(nil)
	_ plugind.Observer  = (*Metrics)(nil)
	_ inproc.Observer   = (*Metrics)(nil)
)

// MaxLabelValues bounds the distinct values of a label fed from data
// (plugin file names, delegate types): later values are counted as "other".
const MaxLabelValues = 32

// latencyBuckets span a warm in-process call (sub-millisecond) to a
// delegate at its time limit.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

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
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "call_duration_seconds",
			Help:    "CNI calls of the rdmanet meta plugin answered by the daemon (attach: ADD, detach: DEL), by command and result (ok, error), from request to answer.",
			Buckets: latencyBuckets,
		}, []string{"command", "result"}),
		callErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "call_errors_total",
			Help: "Failed CNI calls of the rdmanet meta plugin, by command and reason (config, not_ready, pod, network, device, pending_del, cache, delegate, route, status, busy, timeout, panic, other).",
		}, []string{"command", "reason"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "add_step_duration_seconds",
			Help:    "Steps of a successful ADD: resolve (pod, NADs, kubelet device IDs), delegates (every delegate's plugin chain and the default route), status (the network-status write, when ADD waits for it).",
			Buckets: latencyBuckets,
		}, []string{"step"}),
		delegates: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "delegate_duration_seconds",
			Help:    "ADD or DEL of one delegate network (its whole plugin chain), by command, type (of its first plugin, e.g. sriov, macvlan), network (default: the cluster network; attachment) and result (ok, error).",
			Buckets: latencyBuckets,
		}, []string{"command", "type", "network", "result"}),
		pluginExec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rdmanet", Subsystem: "plugin", Name: "exec_duration_seconds",
			Help:    "Plugin calls the daemon made (libcni for the meta plugin's delegates, an in-process sriov for its IPAM), by plugin (file name), command, mode (in_process: run inside the daemon; process: exec'd) and result (ok, error).",
			Buckets: latencyBuckets,
		}, []string{"plugin", "command", "mode", "result"}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "status_writes_total",
			Help: "Asynchronous network-status annotation writes finished, by result (written; pod_gone: the pod was deleted or recreated; cancelled: DEL or a newer ADD; gave_up: API errors until the 2m limit, the pod runs without the annotation).",
		}, []string{"result"}),
		statusRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "meta", Name: "status_write_retries_total",
			Help: "Network-status writes retried after a transient API error (attempts beyond each write's first).",
		}),
		pluginNames:   &boundedLabel{max: MaxLabelValues},
		delegateTypes: &boundedLabel{max: MaxLabelValues},
	}
	m.Registry.MustRegister(m.delAttempts, m.pending, m.released, m.panics, m.pluginCalls,
		m.calls, m.callErrors, m.steps, m.delegates, m.pluginExec, m.statusWrites, m.statusRetries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry (for /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// command bounds CNI_COMMAND to the verbs of the spec.
func command(c string) string {
	switch c {
	case "ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION":
		return c
	}
	return "other"
}

func (m *Metrics) DelAttempt(a meta.DelAttempt) {
	m.delAttempts.WithLabelValues(a.Phase, result(a.Err)).Inc()
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
func (m *Metrics) PluginCall(plugin, cmd, path, res string, d time.Duration) {
	m.pluginCalls.WithLabelValues(m.pluginNames.value(plugin), command(cmd), path, res).Observe(d.Seconds())
}

// Call observes one CNI call of the meta plugin; a failure is also counted
// by its reason (meta.ErrorReason).
func (m *Metrics) Call(cmd string, d time.Duration, err error) {
	cmd = command(cmd)
	m.calls.WithLabelValues(cmd, result(err)).Observe(d.Seconds())
	if err != nil {
		m.callErrors.WithLabelValues(cmd, meta.ErrorReason(err)).Inc()
	}
}

// Step observes one step of an ADD.
func (m *Metrics) Step(step string, d time.Duration) {
	m.steps.WithLabelValues(step).Observe(d.Seconds())
}

// Delegate observes the ADD or DEL of one delegate network.
func (m *Metrics) Delegate(cmd, typ string, isDefault bool, d time.Duration, err error) {
	network := "attachment"
	if isDefault {
		network = "default"
	}
	m.delegates.WithLabelValues(command(cmd), m.delegateTypes.value(typ), network, result(err)).Observe(d.Seconds())
}

// PluginExec observes one plugin call of the daemon's libcni or in-process sriov.
func (m *Metrics) PluginExec(plugin, cmd, mode string, d time.Duration, err error) {
	m.pluginExec.WithLabelValues(m.pluginNames.value(plugin), command(cmd), mode, result(err)).Observe(d.Seconds())
}

// StatusWrite counts one finished network-status write and its retries.
func (m *Metrics) StatusWrite(res string, attempts int) {
	m.statusWrites.WithLabelValues(res).Inc()
	if attempts > 1 {
		m.statusRetries.Add(float64(attempts - 1))
	}
}

// PendingStatusWrites exports n() as rdmanet_meta_status_writes_pending
// (the StatusWriter's Pending), read at scrape time.
func (m *Metrics) PendingStatusWrites(n func() int) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "rdmanet", Subsystem: "meta", Name: "status_writes_pending",
		Help: "Network-status writes queued or being retried now.",
	}, func() float64 { return float64(n()) }))
}

// Ready exports ready() as rdmanet_daemon_ready (1: /readyz answers 200),
// read at scrape time.
func (m *Metrics) Ready(ready func() bool) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "rdmanet", Subsystem: "daemon", Name: "ready",
		Help: "1 when the daemon is ready (/readyz answers 200: its sockets serve, its caches are synced), else 0.",
	}, func() float64 {
		if ready() {
			return 1
		}
		return 0
	}))
}

// CallLimiter exports the daemon-wide limit on CNI calls in flight (over
// both sockets), read at scrape time: rdmanet_daemon_calls_inflight and
// rdmanet_daemon_calls_queued by class (add: ADD and CHECK; del: DEL and
// GC), rdmanet_daemon_calls_rejected_total by class and reason, and the
// limits themselves. With no limit (--max-inflight-calls=0) nothing is
// counted: only the limits (0) are exported.
func (m *Metrics) CallLimiter(l *sockserve.Limiter) {
	if l == nil {
		return
	}
	m.Registry.MustRegister(&limiterCollector{l: l,
		inflight: prometheus.NewDesc("rdmanet_daemon_calls_inflight", "CNI calls running in the daemon and holding one of its --max-inflight-calls slots, by class (add: ADD and CHECK; del: DEL and GC). A delegate's plugin call under its container's call holds none.", []string{"class"}, nil),
		queued:   prometheus.NewDesc("rdmanet_daemon_calls_queued", "CNI calls waiting for a slot (each for at most --max-queue-wait; ADD and CHECK at most --max-queued-calls), by class.", []string{"class"}, nil),
		rejected: prometheus.NewDesc("rdmanet_daemon_calls_rejected_total", "CNI calls refused with CNI error 11 (try again later; the runtime retries), by class and reason (queue_full: --max-queued-calls ADDs were waiting; wait: no slot within --max-queue-wait; stopping: the daemon stopped while it waited).", []string{"class", "reason"}, nil),
		limit:    prometheus.NewDesc("rdmanet_daemon_calls_limit", "The daemon's limits on CNI calls: inflight (--max-inflight-calls, 0: none), del_reserved (--del-reserved-calls), queued (--max-queued-calls, ADD and CHECK).", []string{"limit"}, nil),
	})
}

type limiterCollector struct {
	l                                 *sockserve.Limiter
	inflight, queued, rejected, limit *prometheus.Desc
}

func (c *limiterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inflight
	ch <- c.queued
	ch <- c.rejected
	ch <- c.limit
}

func (c *limiterCollector) Collect(ch chan<- prometheus.Metric) {
	st, lim := c.l.Stats(), c.l.Limits()
	for _, class := range []string{"add", "del"} {
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(st.InFlight[class]), class)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued[class]), class)
		for _, reason := range []string{sockserve.ReasonQueueFull, sockserve.ReasonWait, sockserve.ReasonStopping} {
			if class == "del" && reason == sockserve.ReasonQueueFull {
				continue // never: DELs wait unbounded by the queue
			}
			ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(st.Rejected[[2]string{class, reason}]), class, reason)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(lim.MaxInFlight), "inflight")
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(lim.DelReserve), "del_reserved")
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(lim.MaxQueued), "queued")
}

// IPAMUsage exports the node's IPAM usage from the block caches in dir
// (ipam.ReadUsage), read at scrape time.
func (m *Metrics) IPAMUsage(dir string) {
	m.Registry.MustRegister(&ipamCollector{dir: dir,
		blocks: prometheus.NewDesc("rdmanet_ipam_blocks", "IPAM blocks this node holds, by network (network_name) and range, as of its block cache.", []string{"network", "range"}, nil),
		addrs:  prometheus.NewDesc("rdmanet_ipam_block_addresses", "Addresses in the blocks this node holds (their size), by network and range.", []string{"network", "range"}, nil),
		alloc:  prometheus.NewDesc("rdmanet_ipam_allocated_addresses", "Addresses in this node's blocks held by pods (this node's, or borrowed by other nodes), by network and range.", []string{"network", "range"}, nil),
		resv:   prometheus.NewDesc("rdmanet_ipam_reserved_addresses", "Addresses in this node's blocks that no pod may hold (gateways), by network and range.", []string{"network", "range"}, nil),
		errs:   prometheus.NewDesc("rdmanet_ipam_usage_read_errors", "Block cache files in the IPAM state directory that could not be read or parsed at this scrape (their pools are missing from rdmanet_ipam_*).", nil, nil),
	})
}

type ipamCollector struct {
	dir                              string
	blocks, addrs, alloc, resv, errs *prometheus.Desc
}

func (c *ipamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.blocks
	ch <- c.addrs
	ch <- c.alloc
	ch <- c.resv
	ch <- c.errs
}

func (c *ipamCollector) Collect(ch chan<- prometheus.Metric) {
	usage, err := ipam.ReadUsage(c.dir)
	nerr := 0
	if err != nil {
		nerr = 1
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			nerr = len(j.Unwrap())
		}
	}
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.GaugeValue, float64(nerr))
	if len(usage) > MaxLabelValues*4 {
		usage = usage[:MaxLabelValues*4] // bounded; sorted, so stable
	}
	for _, u := range usage {
		ch <- prometheus.MustNewConstMetric(c.blocks, prometheus.GaugeValue, float64(u.Blocks), u.Network, u.Range)
		ch <- prometheus.MustNewConstMetric(c.addrs, prometheus.GaugeValue, u.Addresses, u.Network, u.Range)
		ch <- prometheus.MustNewConstMetric(c.alloc, prometheus.GaugeValue, float64(u.Allocated), u.Network, u.Range)
		ch <- prometheus.MustNewConstMetric(c.resv, prometheus.GaugeValue, float64(u.Reserved), u.Network, u.Range)
	}
}

// boundedLabel passes the first max distinct values through and maps every
// later one to "other", so a label fed from data cannot grow without bound.
type boundedLabel struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

func (b *boundedLabel) value(v string) string {
	if v == "" {
		return "unknown"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= b.max {
		return "other"
	}
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[v] = true
	return v
}
