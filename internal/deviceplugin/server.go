package deviceplugin

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// ServerOptions are the host paths a pool server uses.
type ServerOptions struct {
	PluginDir  string // kubelet device-plugin dir (sockets), e.g. /var/lib/kubelet/device-plugins
	DevInfoDir string // NPWG device-info dir, e.g. /var/run/k8s.cni.cncf.io/devinfo/dp
	RDMACM     bool   // whether /dev/infiniband/rdma_cm exists on the node
	Logger     *slog.Logger
	// MaxConns bounds the connections served at once (0: DefaultMaxConns);
	// more wait in the socket's backlog until one closes.
	MaxConns int
	// Guard, when set, names devices another allocator (DRA) holds: they
	// are listed Unhealthy to kubelet and Allocate refuses them; what
	// Allocate hands out is reported to it.
	Guard Guard
}

// Server serves one pool over the Device Plugin API on its own socket.
type Server struct {
	Base

	resource string
	opts     ServerOptions
	log      *slog.Logger
	ep       *Endpoint

	mu      sync.Mutex
	pool    *Pool
	devs    []*pluginapi.Device // what ListAndWatch sends, as of the last Update
	changed chan struct{}       // closed and replaced on every device change
	stopped bool
}

// SocketName is the pool's socket file name inside the plugin dir.
func SocketName(resource string) string {
	r := strings.NewReplacer("/", "_", ".", "_")
	return "rdmanet-" + r.Replace(resource) + ".sock"
}

// NewServer prepares a server for pool; Start serves it.
func NewServer(pool *Pool, o ServerOptions) *Server {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("resource", pool.Resource)
	return &Server{
		resource: pool.Resource,
		opts:     o,
		log:      log,
		ep:       &Endpoint{Resource: pool.Resource, Socket: filepath.Join(o.PluginDir, SocketName(pool.Resource)), MaxConns: o.MaxConns, Log: log},
		pool:     pool,
		devs:     apiDevices(pool, o.Guard),
		changed:  make(chan struct{}),
	}
}

// Socket is the path the server listens on.
func (s *Server) Socket() string { return s.ep.Socket }

// Resource served.
func (s *Server) Resource() string { return s.resource }

// Start listens on the socket (replacing a stale one) and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	s.stopped = false
	s.mu.Unlock()
	return s.ep.Start(s)
}

// Stop ends serving and removes the socket. ListAndWatch streams end, which
// tells kubelet the resource is gone.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.ep.Stop()
}

// Register tells kubelet about the pool (kubelet then dials our socket).
func (s *Server) Register(ctx context.Context, kubeletSocket string) error {
	return s.ep.Register(ctx, kubeletSocket)
}

// Update replaces the pool's devices; ListAndWatch streams see the new list
// when anything kubelet can observe changed (IDs, health, topology).
// The pool may be the same object, updated in place (health refresh).
func (s *Server) Update(pool *Pool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pool = pool
	devs := apiDevices(pool, s.opts.Guard)
	// Compare plain values: the sent messages carry protobuf-internal state
	// (size caches) that marshalling changes, so DeepEqual on them would
	// report a change on every call.
	if sameDevices(s.devs, devs) {
		return false
	}
	s.devs = devs
	close(s.changed)
	s.changed = make(chan struct{})
	return true
}

// Pool returns the current pool.
func (s *Server) Pool() *Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pool
}

func sameDevices(a, b []*pluginapi.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Health != b[i].Health || !reflect.DeepEqual(numaIDs(a[i]), numaIDs(b[i])) {
			return false
		}
	}
	return true
}

func numaIDs(d *pluginapi.Device) []int64 {
	var out []int64
	if d.Topology != nil {
		for _, n := range d.Topology.Nodes {
			out = append(out, n.ID)
		}
	}
	return out
}

// apiDevices is what ListAndWatch sends: a device another allocator holds
// (guard) is Unhealthy, so kubelet allocates it to no new pod.
func apiDevices(p *Pool, guard Guard) []*pluginapi.Device {
	if p == nil {
		return nil
	}
	out := make([]*pluginapi.Device, 0, len(p.Devices))
	for i, d := range p.Devices {
		ad := &pluginapi.Device{ID: d.ID, Health: d.Health}
		if _, who := guardHolder(guard, p, &p.Devices[i]); who != "" {
			ad.Health = Unhealthy
		}
		switch {
		case len(d.NUMAs) > 0:
			// a shared slot grants every HCA: it spans their NUMA nodes
			ad.Topology = &pluginapi.TopologyInfo{}
			for _, n := range d.NUMAs {
				ad.Topology.Nodes = append(ad.Topology.Nodes, &pluginapi.NUMANode{ID: int64(n)})
			}
		case d.NUMA >= 0:
			ad.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMA)}}}
		}
		out = append(out, ad)
	}
	return out
}

// ListAndWatch sends the device list now and after every change.
func (s *Server) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		s.mu.Lock()
		devs, ch, stopped := s.devs, s.changed, s.stopped
		s.mu.Unlock()
		if stopped {
			return nil
		}
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return fmt.Errorf("ListAndWatch %s: %w", s.resource, err)
		}
		select {
		case <-ch:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation implements the Device Plugin API.
func (s *Server) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	pool := s.Pool()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		ids := pool.Preferred(cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate returns what a container needs to use its devices: the
// /dev/infiniband nodes, rdma_cm, the PCIDEVICE_ variable, and (exclusive
// pools) a device-info file per VF for the CNI side.
func (s *Server) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	pool := s.Pool()
	byID := make(map[string]*Device, len(pool.Devices))
	for i := range pool.Devices {
		byID[pool.Devices[i].ID] = &pool.Devices[i]
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		car := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
		seen := map[string]bool{}
		addDev := func(path string) {
			if seen[path] {
				return
			}
			seen[path] = true
			car.Devices = append(car.Devices, &pluginapi.DeviceSpec{HostPath: path, ContainerPath: path, Permissions: "rw"})
		}
		var pcis []string
		for _, id := range cr.DevicesIds {
			d := byID[id]
			if d == nil {
				return nil, status.Errorf(codes.InvalidArgument, "Allocate %s: device %q is not in the pool (it may have vanished since kubelet last listed it; kubelet will retry after the next ListAndWatch update)", s.resource, id)
			}
			if pci, who := guardHolder(s.opts.Guard, pool, d); who != "" {
				return nil, status.Error(codes.FailedPrecondition, heldError(s.resource, id, pci, who).Error())
			}
			if pool.Spec.Kind == config.Shared {
				for _, h := range pool.HCAs {
					for _, c := range h.CharDevs {
						addDev(c)
					}
				}
				continue
			}
			for _, c := range d.CharDevs {
				addDev(c)
			}
			pcis = append(pcis, d.PCI)
			if s.opts.DevInfoDir != "" {
				if err := devinfo.Write(s.opts.DevInfoDir, s.resource, d.PCI, devinfo.PCI(d.PCI, d.PF, d.RDMA)); err != nil {
					return nil, status.Errorf(codes.Internal, "Allocate %s: %v", s.resource, err)
				}
			}
		}
		if len(car.Devices) > 0 && s.opts.RDMACM {
			addDev("/dev/infiniband/rdma_cm")
		}
		if len(pcis) > 0 {
			car.Envs[EnvName(s.resource)] = strings.Join(pcis, ",")
		}
		if s.opts.Guard != nil {
			s.opts.Guard.Allocated(s.resource, allocatedPCIs(pool, pcis, len(cr.DevicesIds) > 0))
		}
		s.log.Info("allocated", "devices", cr.DevicesIds, "device_nodes", len(car.Devices))
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

// allocatedPCIs are the PCI functions an Allocate of pool handed out: the
// VFs (pcis) of an exclusive pool, every HCA of a shared one.
func allocatedPCIs(pool *Pool, pcis []string, any bool) []string {
	if pool.Spec.Kind != config.Shared {
		return pcis
	}
	if !any {
		return nil
	}
	out := make([]string, 0, len(pool.HCAs))
	for _, h := range pool.HCAs {
		out = append(out, h.PCI)
	}
	return out
}
