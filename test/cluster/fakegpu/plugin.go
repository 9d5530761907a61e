package fakegpu

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
)

// Defaults of Options.
const (
	DefaultResource  = "nvidia.com/gpu"
	DefaultPluginDir = "/var/lib/kubelet/device-plugins" // pluginapi.DevicePluginPath
	DefaultResync    = time.Second
	// VisibleDevicesEnv is what the NVIDIA container toolkit reads.
	VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"
)

// Options configure the plugin. Host paths are parameters.
type Options struct {
	SysfsRoot     string // where the GPUs are read from; "" is /sys
	PluginDir     string // kubelet's device-plugin dir, default DefaultPluginDir
	KubeletSocket string // kubelet's registration socket, default <PluginDir>/kubelet.sock
	Resource      string // default DefaultResource
	// Replicas > 1 advertises each GPU that many times (IDs <pci>::<i>), as
	// the NVIDIA plugin's time-slicing does; default 1: one device per GPU,
	// its ID the PCI address.
	Replicas int
	// Resync is how often the plugin checks that its socket still exists
	// and kubelet.sock was not recreated (directory events make it react
	// sooner); default DefaultResync.
	Resync time.Duration
	Logger *slog.Logger
}

// device is one advertised device: a GPU, or one replica of it.
type device struct {
	id  string
	gpu GPU
	rep int
}

// Plugin serves the GPUs of a sysfs tree to kubelet, through rdmanet's
// device plugin endpoint (deviceplugin.Endpoint: the socket, its limits,
// the registration) as the agent's pools are served.
type Plugin struct {
	deviceplugin.Base

	o    Options
	log  *slog.Logger
	gpus []GPU
	devs []device
	byID map[string]device
	ep   *deviceplugin.Endpoint

	mu sync.Mutex
	// kubelet identifies the kubelet.sock we last registered through
	// (inode and modification time: a recreated file may get the same
	// inode); zero when not registered since the server (re)started.
	kubelet fileID
}

// New validates o, reads the GPUs and prepares the plugin; Run serves it.
func New(o Options) (*Plugin, error) {
	if o.PluginDir == "" {
		o.PluginDir = DefaultPluginDir
	}
	if o.KubeletSocket == "" {
		o.KubeletSocket = filepath.Join(o.PluginDir, filepath.Base(pluginapi.KubeletSocket))
	}
	if o.Resource == "" {
		o.Resource = DefaultResource
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 0 {
		return nil, fmt.Errorf("replicas %d: want 1 or more", o.Replicas)
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	gpus, err := Discover(o.SysfsRoot)
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("no NVIDIA GPU (vendor 0x%s, class 0x03xxxx) under %s/bus/pci/devices; write a fixture with GPUs (mkfixture --gpus N) or point --sysfs-root at one", VendorNVIDIA, o.SysfsRoot)
	}
	log := o.Logger.With("resource", o.Resource)
	p := &Plugin{o: o, log: log, gpus: gpus, byID: map[string]device{},
		ep: &deviceplugin.Endpoint{Resource: o.Resource, Socket: filepath.Join(o.PluginDir, SocketName(o.Resource)), Log: log}}
	for _, g := range gpus {
		for r := 0; r < o.Replicas; r++ {
			d := device{id: g.PCI, gpu: g, rep: r}
			if o.Replicas > 1 {
				d.id = g.PCI + "::" + strconv.Itoa(r)
			}
			p.devs = append(p.devs, d)
			p.byID[d.id] = d
		}
	}
	return p, nil
}

// SocketName is the plugin's socket file name inside the plugin dir.
func SocketName(resource string) string {
	return "fake-gpu-" + strings.NewReplacer("/", "_", ".", "_").Replace(resource) + ".sock"
}

// Socket is the path the plugin listens on.
func (p *Plugin) Socket() string { return p.ep.Socket }

// GPUs found in sysfs.
func (p *Plugin) GPUs() []GPU { return p.gpus }

// Devices is what ListAndWatch sends: every device healthy, with its GPU's
// NUMA node.
func (p *Plugin) Devices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(p.devs))
	for _, d := range p.devs {
		ad := &pluginapi.Device{ID: d.id, Health: pluginapi.Healthy}
		if d.gpu.NUMA >= 0 {
			ad.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.gpu.NUMA)}}}
		}
		out = append(out, ad)
	}
	return out
}

// Run serves until ctx ends: it listens on its socket, registers with
// kubelet, and when kubelet restarts (it wipes the plugin dir, or
// kubelet.sock is recreated) listens again and re-registers. At the end it
// stops and removes its socket.
func (p *Plugin) Run(ctx context.Context) error {
	if err := p.serve(); err != nil {
		return err
	}
	defer p.stop()
	p.log.Info("serving GPUs", "gpus", len(p.gpus), "devices", len(p.devs), "socket", p.ep.Socket)
	var events <-chan fsnotify.Event
	if w, err := fsnotify.NewWatcher(); err != nil {
		p.log.Warn("cannot watch the plugin dir; kubelet restarts are seen on the periodic check only", "err", err)
	} else {
		defer w.Close()
		if err := w.Add(p.o.PluginDir); err != nil {
			p.log.Warn("cannot watch the plugin dir; kubelet restarts are seen on the periodic check only", "dir", p.o.PluginDir, "err", err)
		}
		events = w.Events
	}
	tick := time.NewTicker(p.o.Resync)
	defer tick.Stop()
	for {
		// A failed step is retried soon: kubelet.sock shows up (bind)
		// a moment before kubelet accepts on it (listen).
		var retry <-chan time.Time
		if !p.sync(ctx) {
			retry = time.After(min(p.o.Resync, retryDelay))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-events:
		case <-retry:
		}
	}
}

// retryDelay bounds the wait before a failed sync is tried again.
const retryDelay = 200 * time.Millisecond

// sync serves again when the socket is gone and registers when kubelet.sock
// is new to us. It reports false when a step failed (it is retried).
func (p *Plugin) sync(ctx context.Context) bool {
	if _, err := os.Stat(p.ep.Socket); err != nil {
		p.log.Warn("plugin socket disappeared (kubelet restarted?); serving again", "socket", p.ep.Socket)
		p.stop()
		if err := p.serve(); err != nil {
			p.log.Error("cannot serve", "err", err)
			return false
		}
	}
	id := identify(p.o.KubeletSocket)
	p.mu.Lock()
	registered := p.kubelet
	p.mu.Unlock()
	if id == (fileID{}) || id == registered {
		return true
	}
	if registered != (fileID{}) {
		p.log.Info("kubelet socket recreated (kubelet restarted); registering again", "kubelet", p.o.KubeletSocket)
	}
	if err := p.register(ctx); err != nil {
		p.log.Warn("registration failed; retrying", "err", err)
		return false
	}
	p.mu.Lock()
	p.kubelet = id
	p.mu.Unlock()
	p.log.Info("registered with kubelet", "kubelet", p.o.KubeletSocket)
	return true
}

// fileID tells a recreated file from the one seen before.
type fileID struct {
	ino   uint64
	mtime time.Time
}

// identify returns path's fileID, zero when it does not exist.
func identify(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	id := fileID{mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino = st.Ino
	}
	return id
}

func (p *Plugin) serve() error {
	if err := p.ep.Start(p); err != nil {
		return err
	}
	p.mu.Lock()
	p.kubelet = fileID{}
	p.mu.Unlock()
	return nil
}

// stop ends serving (ListAndWatch streams end: kubelet marks the devices
// unhealthy) and removes the socket.
func (p *Plugin) stop() { p.ep.Stop() }

func (p *Plugin) register(ctx context.Context) error { return p.ep.Register(ctx, p.o.KubeletSocket) }

// ListAndWatch sends the devices once; they never change (there is no
// driver to report trouble), so the stream then waits for its end.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.Devices()}); err != nil {
		return fmt.Errorf("ListAndWatch %s: %w", p.o.Resource, err)
	}
	<-stream.Context().Done()
	return nil
}

// Allocate gives each container NVIDIA_VISIBLE_DEVICES: the PCI addresses
// of its GPUs (a GPU once, however many of its replicas it got). No device
// nodes or mounts: the fake GPUs have none.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		var pcis []string
		seen := map[string]bool{}
		for _, id := range cr.DevicesIds {
			d, ok := p.byID[id]
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "Allocate %s: device %q is not one this plugin advertises", p.o.Resource, id)
			}
			if !seen[d.gpu.PCI] {
				seen[d.gpu.PCI] = true
				pcis = append(pcis, d.gpu.PCI)
			}
		}
		p.log.Info("allocated", "devices", cr.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{VisibleDevicesEnv: strings.Join(pcis, ",")},
		})
	}
	return resp, nil
}

// GetPreferredAllocation keeps a container on few NUMA nodes and spreads
// replicas over distinct GPUs: after the required devices it picks, one at
// a time, the available device on a NUMA node already picked, then on the
// GPU with the fewest picks so far, then with the lowest ID.
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: p.preferred(cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize)),
		})
	}
	return resp, nil
}

func (p *Plugin) preferred(available, must []string, size int) []string {
	picked := map[string]bool{}
	perGPU := map[string]int{}
	numas := map[int]bool{}
	var out []string
	take := func(id string) {
		picked[id] = true
		out = append(out, id)
		if d, ok := p.byID[id]; ok {
			perGPU[d.gpu.PCI]++
			numas[d.gpu.NUMA] = true
		}
	}
	for _, id := range must {
		if !picked[id] {
			take(id)
		}
	}
	cands := make([]device, 0, len(available))
	for _, id := range available {
		if d, ok := p.byID[id]; ok && !picked[id] {
			cands = append(cands, d)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].id < cands[j].id })
	for len(out) < size && len(cands) > 0 {
		best := 0
		for i := 1; i < len(cands); i++ {
			if p.better(cands[i], cands[best], perGPU, numas) {
				best = i
			}
		}
		take(cands[best].id)
		cands = append(cands[:best], cands[best+1:]...)
	}
	return out
}

// better reports whether a is a better next pick than b (b sorts first by ID).
func (p *Plugin) better(a, b device, perGPU map[string]int, numas map[int]bool) bool {
	if len(numas) > 0 && numas[a.gpu.NUMA] != numas[b.gpu.NUMA] {
		return numas[a.gpu.NUMA]
	}
	return perGPU[a.gpu.PCI] < perGPU[b.gpu.PCI]
}
