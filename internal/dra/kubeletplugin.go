package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Kubelet's default directories for a DRA kubelet plugin.
const (
	DefaultRegistrarDir = kubeletplugin.KubeletRegistryDir                   // /var/lib/kubelet/plugins_registry
	DefaultPluginDir    = kubeletplugin.KubeletPluginsDir + "/" + DriverName // /var/lib/kubelet/plugins/rdma.rdmanet.io
)

// rdmaCM is the RDMA connection manager's node; the device plugin adds it
// to every allocation with RDMA devices when the node has it.
const rdmaCM = "/dev/infiniband/rdma_cm"

// DriverOptions configure the DRA kubelet plugin. Every host path is a parameter.
type DriverOptions struct {
	// NodeName is this node: the DRA pool the publisher publishes.
	NodeName string
	// CDIDir receives one CDI spec file per prepared claim (DefaultCDIDir).
	CDIDir string
	// StateDir holds the checkpoint (CheckpointFile) of prepared claims.
	StateDir string
	// DevInfoDir receives the device-info files of exclusive devices, as
	// the device plugin writes them (devinfo.DefaultDir).
	DevInfoDir string
	// Claimed is the registry shared with the device plugin (its Guard).
	Claimed *Claimed
	// DevicePlugin lists the device-plugin devices pods hold (kubelet's
	// PodResources); Prepare refuses those. Required.
	DevicePlugin DevicePluginUsers
	// NCCLEnv: Prepare gives each claim the NCCL environment of its RDMA
	// devices (NCCL_IB_HCA, NCCL_IB_GID_INDEX; ncclenv.go), except the
	// variables a container of the claim's pod sets itself (--dra-nccl-env).
	NCCLEnv bool
	// Pods reads the pods a claim is reserved for (with NCCLEnv); nil: the
	// API client given to Start.
	Pods PodGetter
	// Fatal is called when the plugin's gRPC service fails for good
	// (e.g. cancel the agent's context, so the DaemonSet restarts it).
	Fatal func(error)
	// HealthEvents records an Event on the pods of a prepared device that
	// turns Unhealthy and back (health.go); nil: none.
	HealthEvents HealthEvents
	// HealthCheckTimeout is how long kubelet keeps a device's reported
	// health (DefaultHealthCheckTimeout).
	HealthCheckTimeout time.Duration
	Logger             *slog.Logger
}

// Driver is the DRA kubelet plugin of DriverName (kubeletplugin.DRAPlugin):
// Prepare resolves each allocated device (vf-<bdf>, hca-<bdf>) in the
// agent's latest inventory, refuses a device the device plugin or another
// claim holds, writes the claim's CDI spec (the RDMA character devices and
// the device plugin's environment) and device-info files, and records the
// claim in a checkpoint; Unprepare undoes that, also after a restart.
type Driver struct {
	o   DriverOptions
	log *slog.Logger

	mu sync.Mutex // serializes Prepare and Unprepare; guards cp
	cp *checkpoint

	// the last Update's devices, under their own lock: Update runs in the
	// agent's loop and must not wait for a Prepare
	devMu  sync.Mutex
	devs   map[string]devEntry // by DRA device name
	rdmaCM bool
	have   bool // Update was called

	// health of the prepared devices for kubelet (health.go)
	health *healthHub
}

// devEntry is what Prepare needs of an inventory device.
type devEntry struct {
	kind, resource, pci, pf, rdma string
	charDevs                      []string
	health, reason                string
	// linkLayer of the RDMA port; on Ethernet gidIndex is the RoCE v2
	// IPv4 GID index NCCL should use (nil: unknown, gidWhy says why).
	linkLayer string
	gidIndex  *int
	gidWhy    string
	// rdmaAway: the pool needs RDMA and the host does not see the
	// device's RDMA device: it was moved into a pod's network namespace
	// (exclusive netns mode), so the device is in use, not broken.
	rdmaAway bool
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// NewDriver validates the options and loads the checkpoint: the claims it
// records hold their devices again (in Claimed) before anything is served.
func NewDriver(o DriverOptions) (*Driver, error) {
	if o.NodeName == "" {
		return nil, errors.New("dra kubelet plugin: node name is empty; fix: set --node-name (or $NODE_NAME from the pod's spec.nodeName)")
	}
	if o.StateDir == "" {
		return nil, errors.New("dra kubelet plugin: no state dir for the checkpoint; fix: set --dra-state-dir")
	}
	if o.DevicePlugin == nil {
		return nil, errors.New("dra kubelet plugin: no source of device-plugin allocations; fix: give kubelet's PodResources socket (--pod-resources-socket)")
	}
	if o.CDIDir == "" {
		o.CDIDir = DefaultCDIDir
	}
	if o.DevInfoDir == "" {
		o.DevInfoDir = devinfo.DefaultDir
	}
	if o.Claimed == nil {
		o.Claimed = NewClaimed()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cp, err := loadCheckpoint(o.StateDir)
	if err != nil {
		return nil, err
	}
	for uid, c := range cp.Claims {
		for _, dev := range c.Devices {
			o.Claimed.hold(dev.PCI, uid, c.name())
		}
	}
	d := &Driver{o: o, log: o.Logger.With("driver", DriverName), cp: cp, devs: map[string]devEntry{}}
	d.health = newHealthHub(o.HealthCheckTimeout, o.HealthEvents, d.log.Info)
	for uid, c := range cp.Claims {
		d.health.prepared(uid, c)
	}
	return d, nil
}

// ObserveHealth sets who learns each health transition of a prepared
// device (the agent's metrics); call it before Start.
func (d *Driver) ObserveHealth(o HealthObserver) { d.health.setObserver(o) }

// Claimed returns the registry shared with the device plugin.
func (d *Driver) Claimed() *Claimed { return d.o.Claimed }

// Update takes the devices of a discovery (the agent's Snapshots hook; it
// copies what it needs, so pools may change afterwards).
func (d *Driver) Update(node *inventory.Node, pools []*deviceplugin.Pool) {
	devs := map[string]devEntry{}
	view := newHealthView(node)
	for _, p := range pools {
		if !p.Advertised {
			continue
		}
		switch p.Spec.Kind {
		case config.Exclusive:
			for _, x := range p.Devices {
				prefix := "pf"
				if x.PF != "" {
					prefix = "vf"
				}
				e := devEntry{kind: KindExclusive, resource: p.Resource, pci: x.PCI, pf: x.PF, rdma: x.RDMA,
					charDevs: append([]string(nil), x.CharDevs...), health: x.Health, reason: x.Reason,
					rdmaAway: p.Spec.NeedsRDMA() && x.RDMA == ""}
				e.linkLayer, e.gidIndex, e.gidWhy = gidOf(node, x.PCI, x.RDMA, true)
				devs[DeviceName(prefix, x.PCI)] = e
				if f := node.Function(x.PCI); f != nil {
					view.devs[DeviceName(prefix, x.PCI)] = deviceHealth(node, f, KindExclusive, p.Spec.NeedsRDMA())
				}
			}
		case config.Shared:
			for _, h := range p.HCAs {
				e := devEntry{kind: KindShared, resource: p.Resource, pci: h.PCI, rdma: h.RDMA,
					charDevs: append([]string(nil), h.CharDevs...), health: h.Health, reason: h.Reason}
				e.linkLayer, e.gidIndex, e.gidWhy = gidOf(node, h.PCI, h.RDMA, false)
				devs[DeviceName("hca", h.PCI)] = e
				if f := node.Function(h.PCI); f != nil {
					view.devs[DeviceName("hca", h.PCI)] = deviceHealth(node, f, KindShared, true)
				}
			}
		}
	}
	d.devMu.Lock()
	d.devs, d.rdmaCM, d.have = devs, node.RDMACM, true
	d.devMu.Unlock()
	d.health.observe(view)
}

// inventory returns the last Update's devices (never changed in place).
func (d *Driver) inventory() (map[string]devEntry, bool, bool) {
	d.devMu.Lock()
	defer d.devMu.Unlock()
	return d.devs, d.rdmaCM, d.have
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin. Claims the
// checkpoint records are answered from it; the others are resolved in the
// inventory first, all of them, so that the NCCL environment of a pod's
// claims prepared in one call can name all their devices; then each is
// prepared on its own.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	dp := &dpLookup{src: d.o.DevicePlugin}
	devs, cm, have := d.inventory()
	inv := &inventoryView{devs: devs, rdmaCM: cm, have: have}
	resolved := map[types.UID]*preparedClaim{}
	failed := map[types.UID]error{}
	for _, c := range claims {
		if d.cp.Claims[c.UID] != nil {
			continue
		}
		if pc, err := d.resolve(c, inv); err != nil {
			failed[c.UID] = err
		} else {
			resolved[c.UID] = pc
		}
	}
	pods := &podCache{get: d.o.Pods, pods: map[types.NamespacedName]podRead{}}
	d.joinRequestEnv(ctx, claims, resolved, pods)
	if d.o.NCCLEnv {
		d.setNCCLEnv(ctx, claims, resolved, failed, pods)
	}
	for _, c := range claims {
		var pc *preparedClaim
		var err error
		switch prev := d.cp.Claims[c.UID]; {
		case prev != nil:
			pc, err = d.again(c, prev)
		case failed[c.UID] != nil:
			err = failed[c.UID]
		default:
			pc, err = d.commit(ctx, c, resolved[c.UID], inv, dp)
		}
		if err != nil {
			d.log.Error("claim not prepared", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "err", err)
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: resultDevices(pc)}
	}
	return out, nil
}

// inventoryView is the inventory one Prepare call works on.
type inventoryView struct {
	devs   map[string]devEntry
	rdmaCM bool
	have   bool
}

// dpLookup asks the device plugin's side once per call, when needed.
type dpLookup struct {
	src     DevicePluginUsers
	done    bool
	holders []DPHolder
	err     error
}

func (l *dpLookup) get(ctx context.Context) ([]DPHolder, error) {
	if !l.done {
		l.holders, l.err = l.src.DevicePluginHolders(ctx)
		l.done = true
	}
	return l.holders, l.err
}

func resultDevices(pc *preparedClaim) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(pc.Devices))
	for _, dev := range pc.Devices {
		out = append(out, kubeletplugin.Device{Requests: dev.Requests, PoolName: dev.Pool, DeviceName: dev.Device,
			CDIDeviceIDs: []string{cdiDeviceID(dev.CDIName)}, ShareID: dev.ShareID})
	}
	return out
}

// again answers a claim prepared before (kubelet or agent restarted)
// from the checkpoint: the same answer, since a device in use may no
// longer be visible on the host (its RDMA device is in the pod's netns).
// The files are written again: /var/run is empty after a reboot. The
// caller holds d.mu.
func (d *Driver) again(c *resourceapi.ResourceClaim, prev *preparedClaim) (*preparedClaim, error) {
	for _, dev := range prev.Devices {
		if dev.DevInfo {
			if err := devinfo.Write(d.o.DevInfoDir, dev.Resource, dev.PCI, devinfo.PCI(dev.PCI, dev.PF, dev.RDMA)); err != nil {
				return nil, fmt.Errorf("claim %s/%s: device %s: %w", c.Namespace, c.Name, dev.Device, err)
			}
		}
	}
	if err := writeCDISpec(d.o.CDIDir, c.UID, prev); err != nil {
		return nil, err
	}
	if pods := podsOf(c); len(pods) > 0 {
		prev.Pods = pods
		d.health.prepared(c.UID, prev)
	}
	return prev, nil
}

// resolve finds the claim's allocated devices of this driver in the
// inventory; it changes nothing. The caller holds d.mu.
func (d *Driver) resolve(c *resourceapi.ResourceClaim, inv *inventoryView) (*preparedClaim, error) {
	name := c.Namespace + "/" + c.Name
	if c.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s is not allocated", name)
	}
	if !inv.have {
		return nil, fmt.Errorf("claim %s: the agent has not scanned the node's RDMA devices yet; kubelet retries", name)
	}
	pc := &preparedClaim{Namespace: c.Namespace, Name: c.Name, Pods: podsOf(c)}
	used := map[string]bool{}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if r.Pool != d.o.NodeName {
			return nil, fmt.Errorf("claim %s: request %s: device %s is in pool %q, but this node's pool is %q: the claim was allocated for another node", name, r.Request, r.Device, r.Pool, d.o.NodeName)
		}
		e, ok := inv.devs[r.Device]
		if !ok {
			return nil, fmt.Errorf("claim %s: request %s: device %s is not on node %s now (its VF or HCA vanished, or its pool is no longer advertised); "+
				"fix: check the node with `rdmanet-agent --once`; delete the pod so its claim is allocated again", name, r.Request, r.Device, d.o.NodeName)
		}
		cdiName := string(c.UID) + "-" + r.Device
		for i := 2; used[cdiName]; i++ {
			cdiName = fmt.Sprintf("%s-%s-%d", c.UID, r.Device, i)
		}
		used[cdiName] = true
		dev := preparedDevice{Requests: []string{r.Request}, Pool: r.Pool, Device: r.Device, ShareID: r.ShareID, CDIName: cdiName,
			Kind: e.kind, Resource: e.resource, PCI: e.pci, PF: e.pf, RDMA: e.rdma, CharDevs: e.charDevs,
			LinkLayer: e.linkLayer, GIDIndex: e.gidIndex, gidWhy: e.gidWhy}
		if len(dev.CharDevs) > 0 && inv.rdmaCM {
			dev.CharDevs = append(append([]string(nil), dev.CharDevs...), rdmaCM)
		}
		pc.Devices = append(pc.Devices, dev)
	}
	setEnv(pc)
	return pc, nil
}

// commit prepares a resolved claim: holds, checks, device-info, CDI spec,
// checkpoint. The caller holds d.mu.
func (d *Driver) commit(ctx context.Context, c *resourceapi.ResourceClaim, pc *preparedClaim, inv *inventoryView, dp *dpLookup) (*preparedClaim, error) {
	name := c.Namespace + "/" + c.Name
	// From here on, undo everything unless the claim is fully prepared.
	ok := false
	defer func() {
		if ok {
			return
		}
		d.o.Claimed.release(c.UID)
		for _, dev := range pc.Devices {
			if dev.DevInfo {
				_ = devinfo.Remove(d.o.DevInfoDir, dev.Resource, dev.PCI)
			}
		}
		_ = removeCDISpec(d.o.CDIDir, c.UID)
		delete(d.cp.Claims, c.UID)
	}()
	// Hold first, then look for other holders: an Allocate of the device
	// plugin from now on is refused, one before shows in PodResources or
	// in Claimed's recent allocations.
	for _, dev := range pc.Devices {
		d.o.Claimed.hold(dev.PCI, c.UID, name)
	}
	for _, dev := range pc.Devices {
		if err := d.free(ctx, name, c.UID, dev, inv, dp); err != nil {
			return nil, err
		}
	}
	for i := range pc.Devices {
		dev := &pc.Devices[i]
		if dev.Kind != KindExclusive {
			continue
		}
		if err := devinfo.Write(d.o.DevInfoDir, dev.Resource, dev.PCI, devinfo.PCI(dev.PCI, dev.PF, dev.RDMA)); err != nil {
			return nil, fmt.Errorf("claim %s: device %s: %w", name, dev.Device, err)
		}
		dev.DevInfo = true
	}
	if err := writeCDISpec(d.o.CDIDir, c.UID, pc); err != nil {
		return nil, err
	}
	d.cp.Claims[c.UID] = pc
	if err := d.cp.save(d.o.StateDir); err != nil {
		return nil, fmt.Errorf("claim %s: %w", name, err)
	}
	ok = true
	d.health.prepared(c.UID, pc)
	d.log.Info("claim prepared", "claim", name, "uid", c.UID, "devices", len(pc.Devices))
	return pc, nil
}

// free checks that nothing but claim uid uses dev: no other claim (an
// exclusive device), no pod through the device plugin, no recent
// device-plugin Allocate; and that the device works.
func (d *Driver) free(ctx context.Context, claim string, uid types.UID, dev preparedDevice, inv *inventoryView, dp *dpLookup) error {
	what := fmt.Sprintf("claim %s: device %s (%s, pool %s)", claim, dev.Device, dev.PCI, dev.Resource)
	if dev.Kind == KindExclusive {
		if others := d.o.Claimed.others(dev.PCI, uid); len(others) > 0 {
			return fmt.Errorf("%s is already prepared for DRA claim %s; an exclusive device serves one claim; "+
				"fix: delete the pod of the other claim, or check the scheduler's allocations (kubectl get resourceclaims -A -o wide)", what, strings.Join(others, ", "))
		}
	}
	holders, err := dp.get(ctx)
	if err != nil {
		return fmt.Errorf("%s: cannot tell whether the device plugin handed it out: %w", what, err)
	}
	for _, h := range holders {
		if h.Resource != dev.Resource || (dev.Kind == KindExclusive && h.DeviceID != dev.PCI) {
			continue
		}
		held := "it"
		if dev.Kind == KindShared {
			held = "slot " + h.DeviceID + " of its HCAs"
		}
		return fmt.Errorf("%s is in use: pod %s holds %s through the device plugin (resource %s); a device never serves a DRA claim and a device-plugin allocation at once; "+
			"fix: delete pod %s or wait for it to end (kubelet retries this claim), or move the workload to DRA; to keep using the device plugin for this hardware, exclude it from the DeviceClass selecting %s",
			what, h.Pod, held, h.Resource, h.Pod, dev.Device)
	}
	if res, age, ok := d.o.Claimed.recentlyAllocated(dev.PCI); ok {
		return fmt.Errorf("%s was handed out by the device plugin (resource %s) %s ago, to a pod kubelet has not recorded yet; "+
			"fix: none needed if that pod fails to start (kubelet retries this claim; the hold lapses after %s); otherwise delete that pod", what, res, age.Round(1e9), RecentAllocation)
	}
	if dev.Kind == KindExclusive && inv.devs[dev.Device].rdmaAway {
		return fmt.Errorf("%s is in use: its RDMA device is not in the host's network namespace (the rdma CNI moved it into a pod's), though neither a claim nor a device-plugin pod holds it by rdmanet's records; "+
			"fix: find the pod with `kubectl rdma doctor`, delete it, and the device returns to the host", what)
	}
	if e := inv.devs[dev.Device]; e.health != deviceplugin.Healthy {
		return fmt.Errorf("%s is unhealthy: %s; fix: repair it (kubelet retries this claim), or delete the pod so the scheduler picks a healthy device", what, e.reason)
	}
	return nil
}

// setEnv gives each request's exclusive devices the device plugin's
// variable, PCIDEVICE_<RESOURCE>=<bdf>[,<bdf>…], on the request's first
// device of that resource (one value per container, as Allocate gives).
func setEnv(pc *preparedClaim) {
	type key struct{ req, res string }
	first := map[key]int{}
	var order []key
	pcis := map[key][]string{}
	for i, dev := range pc.Devices {
		if dev.Kind != KindExclusive {
			continue
		}
		k := key{dev.Requests[0], dev.Resource}
		if _, ok := first[k]; !ok {
			first[k] = i
			order = append(order, k)
		}
		pcis[k] = append(pcis[k], dev.PCI)
	}
	for _, k := range order {
		dev := &pc.Devices[first[k]]
		dev.Env = append(dev.Env, deviceplugin.EnvName(k.res)+"="+strings.Join(pcis[k], ","))
	}
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: it removes
// each claim's CDI spec and device-info files and forgets the claim. A
// claim it does not know (never prepared, or already unprepared) is fine.
func (d *Driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = d.unprepare(c)
		if out[c.UID] != nil {
			d.log.Error("claim not unprepared", "claim", c.String(), "err", out[c.UID])
		}
	}
	return out, nil
}

func (d *Driver) unprepare(c kubeletplugin.NamespacedObject) error {
	if err := removeCDISpec(d.o.CDIDir, c.UID); err != nil {
		return err
	}
	pc := d.cp.Claims[c.UID]
	if pc == nil {
		return nil
	}
	for _, dev := range pc.Devices {
		if dev.DevInfo {
			if err := devinfo.Remove(d.o.DevInfoDir, dev.Resource, dev.PCI); err != nil {
				return fmt.Errorf("claim %s: device %s: %w", pc.name(), dev.Device, err)
			}
		}
	}
	delete(d.cp.Claims, c.UID)
	if err := d.cp.save(d.o.StateDir); err != nil {
		d.cp.Claims[c.UID] = pc // still recorded on disk: keep holding
		return fmt.Errorf("claim %s: %w", pc.name(), err)
	}
	d.o.Claimed.release(c.UID)
	d.health.unprepared(c.UID)
	d.log.Info("claim unprepared", "claim", pc.name(), "uid", c.UID)
	return nil
}

// Prepared returns the UIDs of the claims the checkpoint records.
func (d *Driver) Prepared() []types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]types.UID, 0, len(d.cp.Claims))
	for uid := range d.cp.Claims {
		out = append(out, uid)
	}
	return out
}

// HandleError implements kubeletplugin.DRAPlugin: errors of the helper's
// background work. A fatal one (the gRPC service failed) goes to Fatal.
func (d *Driver) HandleError(_ context.Context, err error, msg string) {
	if errors.Is(err, kubeletplugin.ErrRecoverable) || d.o.Fatal == nil {
		d.log.Error("DRA kubelet plugin: "+msg, "err", err)
		return
	}
	d.o.Fatal(fmt.Errorf("DRA kubelet plugin: %s: %w", msg, err))
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: the health of
// every prepared device, at once and on each change (health.go), for
// kubelet's pod status (allocatedResourcesStatus). Device health also goes
// to the scheduler as ResourceSlice taints (Publisher).
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return d.health.watch(ctx, d.o.NodeName, reports)
}

// PluginPaths are kubelet's directories for the plugin's sockets.
type PluginPaths struct {
	// RegistrarDir is kubelet's plugin registration dir (DefaultRegistrarDir).
	RegistrarDir string
	// PluginDir holds the DRA gRPC socket kubelet dials (DefaultPluginDir).
	PluginDir string
}

// Start serves the plugin to kubelet (registration and DRA gRPC sockets)
// until ctx ends or the helper's Stop. client reads the ResourceClaims.
func (d *Driver) Start(ctx context.Context, client kubernetes.Interface, paths PluginPaths) (*kubeletplugin.Helper, error) {
	if paths.RegistrarDir == "" {
		paths.RegistrarDir = DefaultRegistrarDir
	}
	if paths.PluginDir == "" {
		paths.PluginDir = DefaultPluginDir
	}
	for _, dir := range []string{paths.RegistrarDir, paths.PluginDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("dra kubelet plugin: %w; fix: mount kubelet's plugin directories into the agent", err)
		}
	}
	if d.o.Pods == nil && client != nil {
		d.mu.Lock()
		d.o.Pods = clientPods{client}
		d.mu.Unlock()
	}
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(d.log.Handler()))
	h, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(DriverName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(d.o.NodeName),
		kubeletplugin.RegistrarDirectoryPath(paths.RegistrarDir),
		kubeletplugin.PluginDataDirectoryPath(paths.PluginDir),
	)
	if err != nil {
		return nil, fmt.Errorf("dra kubelet plugin: %w", err)
	}
	d.log.Info("DRA kubelet plugin serving", "registrar_dir", paths.RegistrarDir, "plugin_dir", paths.PluginDir, "cdi_dir", d.o.CDIDir, "state_dir", d.o.StateDir)
	return h, nil
}
