// Package agentmetrics is rdmanet-agent's Prometheus metrics: each pool's
// size, healthy and allocated devices, whether it is advertised and
// registered, registrations with kubelet and kubelet restarts. Pool
// figures are read from the agent at scrape time; allocations from
// kubelet's PodResources API (List), when a socket is given.
// docs/metrics.md lists every metric.
package agentmetrics

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/agent"
)

// Pools is what the collector reads at scrape time (agent.Agent).
type Pools interface {
	PoolStats() []agent.PoolStat
}

// AllocationLister counts the devices kubelet has allocated to pods, by
// resource name.
type AllocationLister interface {
	Allocated(ctx context.Context) (map[string]int, error)
}

// Metrics implements agent.Observer on a registry of its own.
type Metrics struct {
	Registry      *prometheus.Registry
	registrations *prometheus.CounterVec
	restarts      prometheus.Counter
	healthChanges *prometheus.CounterVec
	node          string
}

var _ agent.Observer = (*Metrics)(nil)

// New registers the agent's counters (and the Go and process collectors);
// every series carries the node's name in the "node" label.
func New(node string) *Metrics {
	constLabels := prometheus.Labels{"node": node}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		node:     node,
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "agent", Name: "kubelet_registrations_total",
			Help:        "Registrations of a pool with kubelet, by resource and result (ok, error): one per pool at start, again after every kubelet restart or lost socket.",
			ConstLabels: constLabels,
		}, []string{"resource", "result"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rdmanet", Subsystem: "agent", Name: "kubelet_restarts_total",
			Help:        "kubelet restarts the agent noticed (its registration socket recreated), each followed by re-registering every pool.",
			ConstLabels: constLabels,
		}),
	}
	m.healthChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "rdmanet", Subsystem: "agent", Name: "dra_device_health_transitions_total",
		Help:        "Health transitions of a device prepared for a DRA claim (--dra), by DRA device name and the health it turned to (Healthy, Unhealthy, Unknown), as the kubelet plugin reports them to kubelet for the pod's status.",
		ConstLabels: constLabels,
	}, []string{"device", "health"})
	m.Registry.MustRegister(m.registrations, m.restarts, m.healthChanges,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry (for /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Registered counts one registration.
func (m *Metrics) Registered(resource string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.registrations.WithLabelValues(resource, result).Inc()
}

// KubeletRestarted counts one kubelet restart.
func (m *Metrics) KubeletRestarted() { m.restarts.Inc() }

// DeviceHealthChanged counts one health transition of a prepared DRA
// device (dra.HealthObserver).
func (m *Metrics) DeviceHealthChanged(device string, health kubeletplugin.HealthStatus) {
	m.healthChanges.WithLabelValues(device, string(health)).Inc()
}

// Watch exports the pools' figures, read at scrape time; allocations come
// from alloc (nil: rdmanet_agent_pool_devices_allocated is not exported).
// ready reports /readyz (rdmanet_agent_ready).
func (m *Metrics) Watch(pools Pools, alloc AllocationLister, ready func() bool) {
	cl := prometheus.Labels{"node": m.node}
	lbl := []string{"resource", "kind"}
	m.Registry.MustRegister(&poolCollector{pools: pools, alloc: alloc, ready: ready,
		devices:    prometheus.NewDesc("rdmanet_agent_pool_devices", "Devices of a pool (VFs of an exclusive pool, slots of a shared one), as listed to kubelet.", lbl, cl),
		healthy:    prometheus.NewDesc("rdmanet_agent_pool_devices_healthy", "Devices of a pool reported Healthy to kubelet.", lbl, cl),
		allocated:  prometheus.NewDesc("rdmanet_agent_pool_devices_allocated", "Devices of a pool kubelet has allocated to pods (PodResources List).", lbl, cl),
		advertised: prometheus.NewDesc("rdmanet_agent_pool_advertised", "1 when the pool is offered to kubelet, 0 when it cannot work (see rdmanet-agent --once for its problems).", lbl, cl),
		registered: prometheus.NewDesc("rdmanet_agent_pool_registered", "1 when kubelet accepted the pool's current server, else 0.", lbl, cl),
		allocErr:   prometheus.NewDesc("rdmanet_agent_podresources_up", "1 when kubelet's PodResources API answered this scrape's List, else 0.", nil, cl),
		readyDesc:  prometheus.NewDesc("rdmanet_agent_ready", "1 when the agent is ready (/readyz answers 200: inventory scanned, every advertised pool registered), else 0.", nil, cl),
	})
}

type poolCollector struct {
	pools Pools
	alloc AllocationLister
	ready func() bool

	devices, healthy, allocated, advertised, registered, allocErr, readyDesc *prometheus.Desc
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.devices, c.healthy, c.allocated, c.advertised, c.registered, c.allocErr, c.readyDesc} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	var alloc map[string]int
	if c.alloc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var err error
		alloc, err = c.alloc.Allocated(ctx)
		cancel()
		ch <- prometheus.MustNewConstMetric(c.allocErr, prometheus.GaugeValue, b2f(err == nil))
		if err != nil {
			alloc = nil
		}
	}
	if c.ready != nil {
		ch <- prometheus.MustNewConstMetric(c.readyDesc, prometheus.GaugeValue, b2f(c.ready()))
	}
	for _, p := range c.pools.PoolStats() {
		ch <- prometheus.MustNewConstMetric(c.devices, prometheus.GaugeValue, float64(p.Devices), p.Resource, p.Kind)
		ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, float64(p.Healthy), p.Resource, p.Kind)
		ch <- prometheus.MustNewConstMetric(c.advertised, prometheus.GaugeValue, b2f(p.Advertised), p.Resource, p.Kind)
		ch <- prometheus.MustNewConstMetric(c.registered, prometheus.GaugeValue, b2f(p.Registered), p.Resource, p.Kind)
		if alloc != nil {
			ch <- prometheus.MustNewConstMetric(c.allocated, prometheus.GaugeValue, float64(alloc[p.Resource]), p.Resource, p.Kind)
		}
	}
}

// PodResources lists kubelet's allocations over its PodResources API.
type PodResources struct {
	Socket string

	once sync.Once
	conn *grpc.ClientConn
	err  error
}

// Allocated counts allocated device IDs per resource name (List: every
// pod on the node). A device shared by several containers of one pod
// counts once.
func (p *PodResources) Allocated(ctx context.Context) (map[string]int, error) {
	p.once.Do(func() {
		p.conn, p.err = grpc.NewClient("unix://"+p.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	})
	if p.err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: %w", p.Socket, p.err)
	}
	resp, err := podresourcesapi.NewPodResourcesListerClient(p.conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources List on %s: %w", p.Socket, err)
	}
	ids := map[string]map[string]bool{}
	for _, pr := range resp.PodResources {
		for _, c := range pr.Containers {
			for _, d := range c.Devices {
				if ids[d.ResourceName] == nil {
					ids[d.ResourceName] = map[string]bool{}
				}
				for _, id := range d.DeviceIds {
					ids[d.ResourceName][pr.Namespace+"/"+pr.Name+"\x00"+id] = true
				}
			}
		}
	}
	out := make(map[string]int, len(ids))
	for res, set := range ids {
		out[res] = len(set)
	}
	return out, nil
}

// Close releases the connection.
func (p *PodResources) Close() error {
	if p.conn != nil {
		return p.conn.Close()
	}
	return nil
}
