package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// kubelet is the simulated node's stand-in for kubelet's device manager and
// PodResources API: it accepts device plugin registrations, watches each
// plugin's devices (ListAndWatch), admits pods by asking the plugin for a
// preferred allocation and allocating it, and tells the meta CNI what each
// pod holds. It is not kubelet: no scheduling, no GPUs; its "checkpoint" is
// memory, kept across restart().
type kubelet struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	pluginapi.UnimplementedRegistrationServer

	node      string
	pluginDir string
	prSocket  string
	log       *slog.Logger

	reg, pr *grpc.Server

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a plugin or its devices change
	plugins map[string]*pluginConn
	known   map[string]bool      // every resource a plugin ever registered (kubelet checkpoints them)
	pods    map[string]*podAlloc // namespace/name
	closed  bool
}

type pluginConn struct {
	resource string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	healthy  []string // device IDs in the plugin's order
}

// podAlloc is what kubelet remembers of an admitted pod.
type podAlloc struct {
	Namespace, Name, Container string
	Devices                    map[string][]string // resource -> device IDs
	Responses                  map[string]*pluginapi.ContainerAllocateResponse
	Ignored                    []string // extended resources no plugin serves (e.g. nvidia.com/gpu)
}

// startKubelet serves the registration socket <pluginDir>/kubelet.sock and
// the PodResources API on podResourcesSocket.
func startKubelet(node, pluginDir, podResourcesSocket string, log *slog.Logger) (*kubelet, error) {
	k := &kubelet{node: node, pluginDir: pluginDir, prSocket: podResourcesSocket, log: log, changed: make(chan struct{}),
		plugins: map[string]*pluginConn{}, known: map[string]bool{}, pods: map[string]*podAlloc{}}
	for _, d := range []string{pluginDir, filepath.Dir(podResourcesSocket)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("kubelet stand-in of %s: %w", node, err)
		}
	}
	if err := k.serve(); err != nil {
		return nil, err
	}
	return k, nil
}

// serve (re)creates the registration and PodResources sockets.
func (k *kubelet) serve() error {
	regSock := filepath.Join(k.pluginDir, "kubelet.sock")
	_ = os.Remove(regSock)
	lis, err := net.Listen("unix", regSock)
	if err != nil {
		return fmt.Errorf("kubelet stand-in of %s: registration socket: %w", k.node, err)
	}
	reg := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(reg, k)
	go func() { _ = reg.Serve(lis) }()

	_ = os.Remove(k.prSocket)
	plis, err := net.Listen("unix", k.prSocket)
	if err != nil {
		reg.Stop()
		return fmt.Errorf("kubelet stand-in of %s: pod-resources socket: %w", k.node, err)
	}
	pr := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(pr, k)
	go func() { _ = pr.Serve(plis) }()
	k.mu.Lock()
	k.reg, k.pr, k.closed = reg, pr, false
	k.mu.Unlock()
	return nil
}

// restart is a kubelet restart: both sockets go away and come back, every
// device plugin connection is dropped (the plugins must register again),
// and the pods' allocations survive, as kubelet's checkpoint keeps them.
func (k *kubelet) restart(down time.Duration) error {
	k.stop()
	time.Sleep(down)
	return k.serve()
}

func (k *kubelet) stop() {
	k.mu.Lock()
	k.closed = true
	plugins := k.plugins
	k.plugins = map[string]*pluginConn{}
	k.signal()
	reg, pr := k.reg, k.pr
	k.mu.Unlock()
	reg.Stop()
	pr.Stop()
	for _, p := range plugins {
		p.conn.Close()
	}
}

// signal wakes waiters; k.mu held.
func (k *kubelet) signal() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// Register is the Device Plugin registration call: kubelet dials the
// plugin's endpoint and starts ListAndWatch, as the real device manager does.
func (k *kubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("kubelet stand-in: plugin %s speaks device plugin API %s, want %s", req.ResourceName, req.Version, pluginapi.Version)
	}
	sock := filepath.Join(k.pluginDir, req.Endpoint)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("kubelet stand-in: dial plugin %s at %s: %w", req.ResourceName, sock, err)
	}
	p := &pluginConn{resource: req.ResourceName, conn: conn, client: pluginapi.NewDevicePluginClient(conn), opts: req.Options}
	if p.opts == nil {
		p.opts = &pluginapi.DevicePluginOptions{}
	}
	k.mu.Lock()
	if old := k.plugins[req.ResourceName]; old != nil {
		old.conn.Close()
	}
	k.plugins[req.ResourceName] = p
	k.known[req.ResourceName] = true
	k.signal()
	k.mu.Unlock()
	k.log.Info("device plugin registered", "node", k.node, "resource", req.ResourceName, "endpoint", req.Endpoint)
	go k.watch(p)
	return &pluginapi.Empty{}, nil
}

func (k *kubelet) watch(p *pluginConn) {
	stream, err := p.client.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		k.log.Warn("ListAndWatch failed", "resource", p.resource, "err", err)
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			k.mu.Lock()
			if k.plugins[p.resource] == p {
				p.healthy = nil
				k.signal()
			}
			k.mu.Unlock()
			return
		}
		var ids []string
		for _, d := range resp.Devices {
			if d.Health == pluginapi.Healthy {
				ids = append(ids, d.ID)
			}
		}
		k.mu.Lock()
		p.healthy = ids
		k.signal()
		k.mu.Unlock()
	}
}

// waitResources blocks until every resource is registered with at least
// the given number of healthy devices, or ctx ends.
func (k *kubelet) waitResources(ctx context.Context, want map[string]int) error {
	for {
		k.mu.Lock()
		var missing []string
		for res, n := range want {
			p := k.plugins[res]
			switch {
			case p == nil:
				missing = append(missing, fmt.Sprintf("%s (not registered)", res))
			case len(p.healthy) < n:
				missing = append(missing, fmt.Sprintf("%s (%d healthy devices, need %d)", res, len(p.healthy), n))
			}
		}
		ch := k.changed
		k.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		sort.Strings(missing)
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("node %s: the agent did not serve %s: %w", k.node, strings.Join(missing, ", "), ctx.Err())
		}
	}
}

// admit allocates the extended resources of the pod's first container
// (the demo's pods have one) through GetPreferredAllocation and Allocate.
// Extended resources no plugin serves are recorded as ignored.
func (k *kubelet) admit(ctx context.Context, pod *corev1.Pod) (*podAlloc, error) {
	key := pod.Namespace + "/" + pod.Name
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("pod %s has no containers", key)
	}
	c := pod.Spec.Containers[0]
	a := &podAlloc{Namespace: pod.Namespace, Name: pod.Name, Container: c.Name,
		Devices: map[string][]string{}, Responses: map[string]*pluginapi.ContainerAllocateResponse{}}
	reqs := c.Resources.Limits
	if len(reqs) == 0 {
		reqs = c.Resources.Requests
	}
	names := make([]string, 0, len(reqs))
	for r := range reqs {
		names = append(names, string(r))
	}
	sort.Strings(names)
	// kubelet admits pods one at a time; so does the stand-in.
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errors.New("kubelet stand-in stopped")
	}
	if _, ok := k.pods[key]; ok {
		return nil, fmt.Errorf("pod %s is already admitted on %s", key, k.node)
	}
	for _, res := range names {
		if !strings.Contains(res, "/") || strings.HasPrefix(res, "hugepages-") {
			continue // cpu, memory, ...
		}
		q := reqs[corev1.ResourceName(res)]
		n := int(q.Value())
		if n <= 0 {
			continue
		}
		p := k.plugins[res]
		if p == nil && k.known[res] {
			// as kubelet: a resource whose plugin has not registered again
			// yet (after a kubelet or plugin restart) has no devices to give
			return nil, fmt.Errorf("admit pod %s on %s: insufficient %s: its device plugin has not registered again yet", key, k.node, res)
		}
		if p == nil {
			a.Ignored = append(a.Ignored, fmt.Sprintf("%s=%d", res, n))
			continue
		}
		available := k.available(p)
		if len(available) < n {
			return nil, fmt.Errorf("admit pod %s on %s: insufficient %s: requested %d, %d free of %d healthy; fix: lower --pods or free devices", key, k.node, res, n, len(available), len(p.healthy))
		}
		ids := available[:n]
		if p.opts.GetPreferredAllocationAvailable {
			resp, err := p.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: available, AllocationSize: int32(n)}}})
			if err != nil {
				return nil, fmt.Errorf("admit pod %s on %s: GetPreferredAllocation %s: %w", key, k.node, res, err)
			}
			if len(resp.ContainerResponses) == 1 && validPick(resp.ContainerResponses[0].DeviceIDs, available, n) {
				ids = resp.ContainerResponses[0].DeviceIDs
			} else {
				k.log.Warn("preferred allocation unusable; taking the first free devices", "resource", res, "pod", key)
			}
		}
		resp, err := p.client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if err != nil {
			return nil, fmt.Errorf("admit pod %s on %s: Allocate %s %v: %w", key, k.node, res, ids, err)
		}
		if len(resp.ContainerResponses) != 1 {
			return nil, fmt.Errorf("admit pod %s on %s: Allocate %s returned %d container responses for 1 container", key, k.node, res, len(resp.ContainerResponses))
		}
		a.Devices[res] = slices.Clone(ids)
		a.Responses[res] = resp.ContainerResponses[0]
	}
	k.pods[key] = a
	return a, nil
}

func validPick(ids, available []string, n int) bool {
	if len(ids) != n {
		return false
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || !slices.Contains(available, id) {
			return false
		}
		seen[id] = true
	}
	return true
}

// available lists p's healthy devices no pod holds; k.mu held.
func (k *kubelet) available(p *pluginConn) []string {
	used := map[string]bool{}
	for _, a := range k.pods {
		for _, id := range a.Devices[p.resource] {
			used[id] = true
		}
	}
	var out []string
	for _, id := range p.healthy {
		if !used[id] {
			out = append(out, id)
		}
	}
	return out
}

// release forgets the pod's devices (the pod was deleted).
func (k *kubelet) release(namespace, name string) {
	k.mu.Lock()
	delete(k.pods, namespace+"/"+name)
	k.mu.Unlock()
}

func (k *kubelet) podResources(a *podAlloc) *podresourcesapi.PodResources {
	c := &podresourcesapi.ContainerResources{Name: a.Container}
	res := make([]string, 0, len(a.Devices))
	for r := range a.Devices {
		res = append(res, r)
	}
	sort.Strings(res)
	for _, r := range res {
		c.Devices = append(c.Devices, &podresourcesapi.ContainerDevices{ResourceName: r, DeviceIds: slices.Clone(a.Devices[r])})
	}
	return &podresourcesapi.PodResources{Name: a.Name, Namespace: a.Namespace, Containers: []*podresourcesapi.ContainerResources{c}}
}

// Get answers as kubelet does for one pod.
func (k *kubelet) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := k.pods[req.PodNamespace+"/"+req.PodName]
	if a == nil {
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
	}
	return &podresourcesapi.GetPodResourcesResponse{PodResources: k.podResources(a)}, nil
}

// List answers as kubelet does for every admitted pod.
func (k *kubelet) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := make([]string, 0, len(k.pods))
	for key := range k.pods {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for _, key := range keys {
		resp.PodResources = append(resp.PodResources, k.podResources(k.pods[key]))
	}
	return resp, nil
}
