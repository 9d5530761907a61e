package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// PublisherOptions configure a Publisher. Every host path is a parameter.
type PublisherOptions struct {
	// Client reaches the API server (ResourceSlices; the Node, which owns
	// the slices so they go when the node goes).
	Client kubernetes.Interface
	// NodeName is this node: the slices' spec.nodeName and the DRA pool's name.
	NodeName string
	// Topology answers pcieRoot and firmware; default NewSysfsTopology(SysfsRoot).
	Topology  Topology
	SysfsRoot string
	Logger    *slog.Logger
	// InUse, when set, lists the devices pods hold through the device
	// plugin (kubelet's PodResources); every InUsePoll the publisher taints
	// them TaintDevicePlugin, so kube-scheduler allocates no claim a
	// device kubelet already gave a pod (one device, one path).
	InUse DevicePluginUsers
	// InUsePoll is how often InUse is asked (default 2s).
	InUsePoll time.Duration
}

// Publisher keeps the node's ResourceSlices of DriverName in step with the
// agent's snapshots, through k8s.io/dynamic-resource-allocation's
// ResourceSlice controller (the one the kubelet plugin helper's
// PublishResources runs; this publisher needs no kubelet plugin, so it
// runs the controller itself, owned by the Node as that helper does).
// One DRA pool per node, named after it; its devices are split into
// slices of MaxDevicesPerSlice.
type Publisher struct {
	o   PublisherOptions
	log *slog.Logger

	mu   sync.Mutex
	ctx  context.Context
	ctrl *resourceslice.Controller
	base []resourceapi.Device // the last snapshot's devices, without in-use taints
	// inUse: device-plugin holders, "resource\x00deviceID" -> pod (nil
	// until InUse first answered)
	inUse map[string]string
	last  []resourceapi.Device // what was published: base with in-use taints
	have  bool                 // last was published (an empty list counts)
	// unrooted: the problems of devices published without a PCIe root,
	// each logged once while it lasts
	unrooted map[string]bool
	pollErr  string // the last InUse error logged
}

// NewPublisher validates the options; nothing is published before Start
// and the first Update.
func NewPublisher(o PublisherOptions) (*Publisher, error) {
	if o.Client == nil {
		return nil, errors.New("dra publisher: no API client")
	}
	if o.NodeName == "" {
		return nil, errors.New("dra publisher: node name is empty; fix: set --node-name (or $NODE_NAME from the pod's spec.nodeName)")
	}
	if o.Topology == nil {
		o.Topology = NewSysfsTopology(o.SysfsRoot)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Publisher{o: o, log: o.Logger.With("driver", DriverName)}, nil
}

// Start binds the publisher to ctx: the controller runs (from the first
// Update on) until ctx ends or Stop is called.
func (p *Publisher) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx = ctx
	if p.o.InUse != nil {
		go p.pollInUse(ctx)
	}
}

// pollInUse asks InUse every InUsePoll and publishes again when the set of
// devices pods hold through the device plugin changed. When kubelet cannot
// be asked, the last answer stands (logged once per distinct error).
func (p *Publisher) pollInUse(ctx context.Context) {
	every := p.o.InUsePoll
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		holders, err := p.o.InUse.DevicePluginHolders(ctx)
		p.mu.Lock()
		if err != nil {
			if err.Error() != p.pollErr && ctx.Err() == nil {
				p.log.Warn("cannot ask kubelet which devices pods hold through the device plugin; their in-use taints stay as last known", "err", err)
			}
			p.pollErr = err.Error()
		} else {
			p.pollErr = ""
			set := map[string]string{}
			for _, h := range holders {
				set[h.Resource+"\x00"+h.DeviceID] = h.Pod
			}
			if p.inUse == nil || !maps.Equal(set, p.inUse) {
				p.inUse = set
				if p.have {
					if err := p.publishLocked(); err != nil {
						p.log.Error("DRA devices not published", "err", err)
					}
				}
			}
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// withInUse returns base with TaintDevicePlugin on every device a pod holds
// through the device plugin: an exclusive device whose deviceID (its PCI
// address) the pool's resource lists, a shared device while any slot of its
// pool is in use (a slot grants every HCA of the pool). base is not changed.
func withInUse(base []resourceapi.Device, inUse map[string]string) []resourceapi.Device {
	if len(inUse) == 0 {
		return base
	}
	busyPools := map[string]bool{}
	for k := range inUse {
		res, _, _ := strings.Cut(k, "\x00")
		busyPools[res] = true
	}
	out := make([]resourceapi.Device, len(base))
	for i, d := range base {
		out[i] = d
		res := attrString(d, AttrMultusResourceName)
		busy := false
		switch attrString(d, AttrKind) {
		case KindExclusive:
			_, busy = inUse[res+"\x00"+attrString(d, AttrMultusDeviceID)]
		case KindShared:
			busy = busyPools[res]
		}
		if busy {
			out[i].Taints = append(slices.Clone(d.Taints), resourceapi.DeviceTaint{Key: TaintDevicePlugin, Effect: resourceapi.DeviceTaintEffectNoSchedule})
		}
	}
	return out
}

func attrString(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// Update publishes the devices of a snapshot when they differ from what
// was published last. It does not block on the API server (the controller
// syncs in the background), so the agent may call it under its lock. A
// device whose PCIe root cannot be determined is published without
// resource.kubernetes.io/pcieRoot, and logged (once, while it lasts), so
// one odd function never keeps the node's other devices from DRA.
func (p *Publisher) Update(node *inventory.Node, pools []*deviceplugin.Pool) error {
	devs, problems := Devices(node, pools, p.o.Topology)
	if t, ok := p.o.Topology.(*SysfsTopology); ok {
		keep := map[string]bool{}
		for _, f := range node.Functions {
			keep[f.BDF] = true
		}
		t.Forget(keep)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := map[string]bool{}
	for _, err := range problems {
		now[err.Error()] = true
		if !p.unrooted[err.Error()] {
			p.log.Warn("DRA device published without its PCIe root; claims that align devices on "+string(AttrPCIeRoot)+" will not pick it", "err", err)
		}
	}
	p.unrooted = now
	// The agent hands over a fresh discovery on every rescan. When nothing
	// changed, keep the devices already held (and published): holding each
	// rescan's equal copy beside the published one doubled the publisher's
	// memory, and comparing a list with itself is free.
	if p.base != nil && apiequality.Semantic.DeepEqual(devs, p.base) {
		devs = p.base
	}
	p.base = devs
	return p.publishLocked()
}

// publishLocked hands base with the in-use taints to the controller when it
// differs from what was published. The caller holds p.mu.
func (p *Publisher) publishLocked() error {
	devs := withInUse(p.base, p.inUse)
	if p.have && apiequality.Semantic.DeepEqual(devs, p.last) {
		return nil
	}
	if p.ctx == nil {
		return errors.New("dra publisher: Update before Start")
	}
	res := p.resources(devs)
	if p.ctrl == nil {
		ctx := klog.NewContext(p.ctx, logr.FromSlogHandler(p.log.Handler()))
		ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
			DriverName:   DriverName,
			KubeClient:   p.o.Client,
			Owner:        &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: p.o.NodeName},
			Resources:    res,
			ErrorHandler: p.handleError,
		})
		if err != nil {
			return fmt.Errorf("dra publisher: start ResourceSlice controller: %w", err)
		}
		p.ctrl = ctrl
	} else {
		p.ctrl.Update(res)
	}
	p.log.Info("publishing DRA devices", "node", p.o.NodeName, "devices", len(devs), "tainted", tainted(devs))
	p.last, p.have = devs, true
	return nil
}

func (p *Publisher) resources(devs []resourceapi.Device) *resourceslice.DriverResources {
	var slices []resourceslice.Slice
	for _, d := range Slices(devs) {
		slices = append(slices, resourceslice.Slice{Devices: d})
	}
	return &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{p.o.NodeName: {Slices: slices}}}
}

func (p *Publisher) handleError(_ context.Context, err error, msg string) {
	var dropped *resourceslice.DroppedFieldsError
	if errors.As(err, &dropped) {
		p.log.Error("the API server dropped fields of rdmanet's ResourceSlices: a DRA feature is disabled in the cluster; "+
			"shared devices need DRAConsumableCapacity, unhealthy taints DRADeviceTaints (enable them on kube-apiserver and kube-scheduler, or publish exclusive pools only)",
			"msg", msg, "disabled", dropped.DisabledFeatures(), "err", err)
		return
	}
	p.log.Error("publishing ResourceSlices failed; retrying", "msg", msg, "err", err)
}

// Published returns the devices last handed to the controller (for
// reports and tests).
func (p *Publisher) Published() []resourceapi.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Stop stops the controller. The slices stay, so an agent restart does
// not make the node's devices vanish from the scheduler; they go with the
// Node (owner reference), and docs/dra.md says how to remove them when
// turning --dra off.
func (p *Publisher) Stop() {
	p.mu.Lock()
	ctrl := p.ctrl
	p.ctrl = nil
	p.mu.Unlock()
	ctrl.Stop()
}

func tainted(devs []resourceapi.Device) int {
	n := 0
	for _, d := range devs {
		if len(d.Taints) > 0 {
			n++
		}
	}
	return n
}
