package dra

// Device health of prepared devices for kubelet (KEP-4680: resource health
// in pod status). The agent's rescan loop hands every discovery and every
// health change to Driver.Update; Update maps what the host sees of each
// device to a kubelet health (deviceHealth), and the health hub compares
// the prepared devices' health with what it last reported: a change goes
// at once to every WatchHealthStatus stream (kubelet's), to the
// HealthObserver (metrics) and, for Unhealthy and back, to an Event on each
// pod using the device. There is no poll loop of its own: the agent's
// --resync refresh is the only reader of sysfs.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// DefaultHealthCheckTimeout is how long kubelet keeps a reported health
// before it shows Unknown: the agent re-sends the health of its prepared
// devices on its rescans (every discovery, at least every 10 s) at least
// every third of it, so only an agent whose loop stopped decays to Unknown.
const DefaultHealthCheckTimeout = 60 * time.Second

// Reasons of the Events on a pod whose prepared device changes health.
const (
	EventReasonDeviceUnhealthy = "RDMADeviceUnhealthy"
	EventReasonDeviceHealthy   = "RDMADeviceHealthy"
)

// HealthObserver learns each health transition of a prepared device (the
// agent's metrics). It must not block.
type HealthObserver interface {
	DeviceHealthChanged(device string, health kubeletplugin.HealthStatus)
}

// HealthEvents records an Event on a pod whose device turned Unhealthy
// (warning) or Healthy again. It must not block.
type HealthEvents interface {
	DeviceHealthEvent(pod PodRef, unhealthy bool, reason, message string)
}

// PodRef names a pod a claim is reserved for.
type PodRef struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
}

// podsOf returns the pods a claim is reserved for.
func podsOf(c *resourceapi.ResourceClaim) []PodRef {
	var out []PodRef
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			out = append(out, PodRef{Namespace: c.Namespace, Name: r.Name, UID: r.UID})
		}
	}
	return out
}

// health is one device's health as kubelet gets it.
type health struct {
	status  kubeletplugin.HealthStatus
	message string
}

// deviceHealth maps what the host sees of a prepared device's PCI function
// to its health. kind is KindExclusive or KindShared; needRDMA: the pool
// hands out the function's RDMA device.
//
// Unhealthy: a VF's PF link failed (admin up, operstate down,
// lowerlayerdown or notpresent: carrier lost); the function's own link
// failed; an RDMA port is not ACTIVE (DOWN, INIT, ARMED); a shared HCA's
// RDMA device or netdev is gone. An exclusive device's netdev and RDMA
// device leave the host's network namespace for the pod's (rdmanet's CNI
// moves them), so their absence from the host is its use, not a failure:
// then only the PF link and the function's presence are checked.
func deviceHealth(node *inventory.Node, f *inventory.Function, kind string, needRDMA bool) health {
	if f.IsVF {
		if pf := node.Function(f.PF); pf != nil && deviceplugin.LinkDown(pf) {
			return health{kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("PF %s (%s) link is %s: carrier lost", pf.Netdev(), pf.BDF, pf.OperState)}
		}
	}
	if deviceplugin.LinkDown(f) {
		return health{kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("netdev %s link is %s: carrier lost", f.Netdev(), f.OperState)}
	}
	if kind == KindShared {
		if !f.HasRDMA() {
			return health{kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("HCA %s has no RDMA device any more (driver unbound or device failed)", f.BDF)}
		}
		if nd := f.Netdev(); nd != "" && f.OperState == "" {
			return health{kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("netdev %s of HCA %s is gone", nd, f.BDF)}
		}
	}
	for _, r := range f.RDMA {
		for _, p := range r.Ports {
			if !deviceplugin.PortActive(p.State) {
				return health{kubeletplugin.HealthStatusUnhealthy, deviceplugin.PortProblem(r.Name, p)}
			}
		}
	}
	if kind == KindExclusive && ((needRDMA && !f.HasRDMA()) || (f.Netdev() != "" && f.OperState == "")) {
		return health{kubeletplugin.HealthStatusHealthy, "in the pod's network namespace; the host checks its PF link and PCI function"}
	}
	return health{status: kubeletplugin.HealthStatusHealthy}
}

// healthView is what one Update saw: the health of every device it
// listed, and of every PCI function of the node as either kind of device.
type healthView struct {
	have  bool
	at    time.Time
	devs  map[string]health         // by DRA device name
	funcs map[string]functionHealth // by PCI address
}

type functionHealth struct{ exclusive, shared health }

func newHealthView(node *inventory.Node) healthView {
	v := healthView{have: true, at: time.Now(), devs: map[string]health{}, funcs: map[string]functionHealth{}}
	for _, f := range node.Functions {
		v.funcs[f.BDF] = functionHealth{exclusive: deviceHealth(node, f, KindExclusive, true), shared: deviceHealth(node, f, KindShared, true)}
	}
	return v
}

// of returns the health of a prepared device of kind in the view. A
// device no advertised pool lists any more is Unhealthy when its function
// is gone or failing (a shared pool drops an HCA that lost its RDMA
// device), else Unknown: taken out of the configuration, it is not watched.
func (v *healthView) of(name, pci, kind string) health {
	if !v.have {
		return health{kubeletplugin.HealthStatusUnknown, "the agent has not scanned the node's RDMA devices yet"}
	}
	if h, ok := v.devs[name]; ok {
		return h
	}
	fh, ok := v.funcs[pci]
	if !ok {
		return health{kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("PCI function %s is gone from the node (VF removed, driver unbound or device failed)", pci)}
	}
	h := fh.exclusive
	if kind == KindShared {
		h = fh.shared
	}
	if h.status == kubeletplugin.HealthStatusUnhealthy {
		return h
	}
	return health{kubeletplugin.HealthStatusUnknown, "no longer in an advertised pool of the agent's configuration: its health is not watched"}
}

// watched is a prepared device: the claims (and their pods) using it.
type watched struct {
	pci    string
	kind   string
	claims map[types.UID]claimUse
	cur    health
	warned bool // an Unhealthy Event went out; a Healthy one follows
}

type claimUse struct {
	name string
	pods []PodRef
}

// healthHub holds the prepared devices' health and the streams watching it.
type healthHub struct {
	timeout time.Duration
	log     logFunc

	mu       sync.Mutex
	view     healthView
	devs     map[string]*watched // by DRA device name
	gen      uint64              // bumped when a reported health or message changes
	subs     map[chan struct{}]struct{}
	observer HealthObserver
	events   HealthEvents
}

type logFunc func(msg string, args ...any)

func newHealthHub(timeout time.Duration, events HealthEvents, log logFunc) *healthHub {
	if timeout <= 0 {
		timeout = DefaultHealthCheckTimeout
	}
	return &healthHub{timeout: timeout, log: log, events: events, devs: map[string]*watched{}, subs: map[chan struct{}]struct{}{}}
}

func (h *healthHub) setObserver(o HealthObserver) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observer = o
}

// prepared records a claim's devices as watched (Prepare, a restart's
// checkpoint); their health goes into the next report.
func (h *healthHub) prepared(uid types.UID, pc *preparedClaim) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, dev := range pc.Devices {
		w := h.devs[dev.Device]
		if w == nil {
			w = &watched{pci: dev.PCI, kind: dev.Kind, claims: map[types.UID]claimUse{}}
			w.cur = h.view.of(dev.Device, dev.PCI, dev.Kind)
			h.devs[dev.Device] = w
		}
		w.claims[uid] = claimUse{name: pc.name(), pods: pc.Pods}
	}
	h.gen++
	h.notify()
}

// unprepared forgets a claim; a device no claim uses is no longer reported.
func (h *healthHub) unprepared(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, w := range h.devs {
		if _, ok := w.claims[uid]; !ok {
			continue
		}
		delete(w.claims, uid)
		if len(w.claims) == 0 {
			delete(h.devs, name)
		}
		h.gen++
	}
	h.notify()
}

// observe takes an Update's view: transitions of prepared devices are
// counted, logged and recorded as Events, and every stream is woken (a
// re-send of unchanged health keeps kubelet's entries fresh).
func (h *healthHub) observe(v healthView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.view = v
	for _, name := range slices.Sorted(maps.Keys(h.devs)) {
		w := h.devs[name]
		now := v.of(name, w.pci, w.kind)
		if now == w.cur {
			continue
		}
		prev := w.cur
		w.cur = now
		h.gen++
		if now.status == prev.status {
			continue // the message alone changed
		}
		h.log("prepared device health changed", "device", name, "pci", w.pci, "from", string(prev.status), "health", string(now.status), "reason", now.message)
		if h.observer != nil {
			h.observer.DeviceHealthChanged(name, now.status)
		}
		h.event(name, w, now)
	}
	h.notify()
}

// event records an Event on each pod of the device's claims when it turns
// Unhealthy, and when it is Healthy again after such an Event.
func (h *healthHub) event(name string, w *watched, now health) {
	unhealthy := now.status == kubeletplugin.HealthStatusUnhealthy
	if !unhealthy && (now.status != kubeletplugin.HealthStatusHealthy || !w.warned) {
		return
	}
	w.warned = unhealthy
	if h.events == nil {
		return
	}
	for _, uid := range slices.Sorted(maps.Keys(w.claims)) {
		c := w.claims[uid]
		for _, pod := range c.pods {
			var reason, msg string
			if unhealthy {
				reason = EventReasonDeviceUnhealthy
				msg = fmt.Sprintf("pod %s/%s: RDMA device %s (PCI %s) of claim %s is Unhealthy: %s", pod.Namespace, pod.Name, name, w.pci, c.name, now.message)
			} else {
				reason = EventReasonDeviceHealthy
				msg = fmt.Sprintf("pod %s/%s: RDMA device %s (PCI %s) of claim %s is Healthy again", pod.Namespace, pod.Name, name, w.pci, c.name)
			}
			h.events.DeviceHealthEvent(pod, unhealthy, reason, msg)
		}
	}
}

// notify wakes every stream without blocking. The caller holds h.mu.
func (h *healthHub) notify() {
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// report is the health of every prepared device now, and its generation.
func (h *healthHub) report() (kubeletplugin.DeviceHealthReport, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rep := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(h.devs))}
	for _, name := range slices.Sorted(maps.Keys(h.devs)) {
		w := h.devs[name]
		rep.Devices = append(rep.Devices, kubeletplugin.DeviceHealth{PoolName: "", DeviceName: name, Health: w.cur.status,
			Message: w.cur.message, LastUpdated: h.view.at, HealthCheckTimeout: h.timeout})
	}
	return rep, h.gen
}

func (h *healthHub) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

// watch streams reports of pool's prepared devices until ctx ends: one at
// once, then one whenever a health changes, and on an Update a re-send
// when the last one is a third of the timeout old.
func (h *healthHub) watch(ctx context.Context, pool string, reports chan<- kubeletplugin.DeviceHealthReport) error {
	wake, cancel := h.subscribe()
	defer cancel()
	first := true
	var lastGen uint64
	var lastSent time.Time
	for {
		rep, gen := h.report()
		if first || gen != lastGen || time.Since(lastSent) >= h.timeout/3 {
			for i := range rep.Devices {
				rep.Devices[i].PoolName = pool
			}
			select {
			case <-ctx.Done():
				return nil
			case reports <- rep:
			}
			first, lastGen, lastSent = false, gen, time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}
