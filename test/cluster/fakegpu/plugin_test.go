package fakegpu

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// fakeKubelet is kubelet's side of device plugin registration, built on
// k8s.io/kubelet's generated API: it accepts Register on kubelet.sock,
// dials the plugin's endpoint in the same directory and keeps what
// ListAndWatch sends, as kubelet's device manager does.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	t   *testing.T
	dir string
	srv *grpc.Server

	mu      sync.Mutex
	reqs    []*pluginapi.RegisterRequest
	devices map[string][]*pluginapi.Device // by resource, the last list
	conns   []*grpc.ClientConn
	clients map[string]pluginapi.DevicePluginClient
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	sock := filepath.Join(dir, "kubelet.sock")
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{t: t, dir: dir, srv: grpc.NewServer(), devices: map[string][]*pluginapi.Device{}, clients: map[string]pluginapi.DevicePluginClient{}}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	t.Cleanup(k.stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported version %q", req.Version)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", req.Endpoint, err)
	}
	stream, err := c.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return nil, err
	}
	k.mu.Lock()
	k.reqs = append(k.reqs, req)
	k.conns = append(k.conns, conn)
	k.clients[req.ResourceName] = c
	k.mu.Unlock()
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			k.mu.Lock()
			k.devices[req.ResourceName] = resp.Devices
			k.mu.Unlock()
		}
	}()
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) stop() {
	k.srv.Stop()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
	k.conns = nil
}

func (k *fakeKubelet) registrations() []*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*pluginapi.RegisterRequest(nil), k.reqs...)
}

// listed is the last device list of resource as "id@numa" strings.
func (k *fakeKubelet) listed(resource string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return describe(k.devices[resource])
}

func (k *fakeKubelet) client(resource string) pluginapi.DevicePluginClient {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.clients[resource]
}

// restart is kubelet restarting as its device manager does: it stops, wipes
// the device-plugin dir (when wipe is set) and comes back with a new
// kubelet.sock.
func (k *fakeKubelet) restart(t *testing.T, wipe bool) *fakeKubelet {
	t.Helper()
	k.stop()
	// A kubelet takes seconds to come back. A socket recreated within one
	// tick of the kernel's file clock (a few ms) could reuse the inode and
	// the timestamp, and look like the old one.
	time.Sleep(50 * time.Millisecond)
	if wipe {
		ents, err := os.ReadDir(k.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if err := os.Remove(filepath.Join(k.dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	return startKubelet(t, k.dir)
}

func describe(devs []*pluginapi.Device) []string {
	var out []string
	for _, d := range devs {
		var numas []string
		if d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				numas = append(numas, fmt.Sprint(n.ID))
			}
		}
		out = append(out, fmt.Sprintf("%s@%s/%s", d.ID, strings.Join(numas, ","), d.Health))
	}
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// sockDir is a plugin dir with a short path: t.TempDir's names, long
// subtest names included, overflow a unix socket address (108 bytes).
func sockDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fakegpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// fixture returns the root of the standard node with gpus GPUs. The
// plugin only reads sysfs, so tests share one tree per GPU count (writing
// one costs seconds on a busy machine).
func fixture(t *testing.T, gpus int) string {
	t.Helper()
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	if root, ok := fixtures.roots[gpus]; ok {
		return root
	}
	s, err := sysfsfixture.NewStandard(filepath.Join(fixtures.dir, fmt.Sprintf("sys-%d", gpus)), sysfsfixture.StandardOptions{GPUs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.roots[gpus] = s.Root
	return s.Root
}

var fixtures struct {
	mu    sync.Mutex
	dir   string
	roots map[int]string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakegpu-sysfs")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtures.dir, fixtures.roots = dir, map[int]string{}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// runPlugin starts the plugin on sysfs with o; it stops at the test's end.
func runPlugin(t *testing.T, sysfs string, o Options) *Plugin {
	t.Helper()
	o.SysfsRoot = sysfs
	if o.Resync == 0 {
		o.Resync = 50 * time.Millisecond
	}
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if _, err := os.Stat(p.Socket()); err == nil {
			t.Errorf("socket %s left behind", p.Socket())
		}
	})
	return p
}

var fourGPUs = []string{
	"0000:42:00.0@0/Healthy", "0000:43:00.0@0/Healthy", "0000:82:00.0@1/Healthy", "0000:c2:00.0@1/Healthy",
}

func TestDiscover(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T) string
		want  []GPU
	}{
		{name: "standard node with four GPUs", build: func(t *testing.T) string { return fixture(t, 4) }, want: []GPU{
			{PCI: "0000:42:00.0", Device: "2330", NUMA: 0, PCIRoot: "pci0000:40"},
			{PCI: "0000:43:00.0", Device: "2330", NUMA: 0, PCIRoot: "pci0000:40"},
			{PCI: "0000:82:00.0", Device: "2330", NUMA: 1, PCIRoot: "pci0000:80"},
			{PCI: "0000:c2:00.0", Device: "2330", NUMA: 1, PCIRoot: "pci0000:c0"},
		}},
		{name: "standard node without GPUs", build: func(t *testing.T) string { return fixture(t, 0) }, want: []GPU{}},
		{name: "VGA counts, audio and other vendors do not, no NUMA is -1", build: func(t *testing.T) string {
			n, err := sysfsfixture.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				bdf, vendor, class string
				numa               int
			}{
				{"0000:17:00.0", "10de", "0x030000", -1}, // VGA, no NUMA
				{"0000:17:00.1", "10de", "0x040300", 0},  // the GPU's HD audio function
				{"0000:18:00.0", "1002", "0x030200", 0},  // another vendor's 3D controller
				{"0000:19:00.0", "10de", "0x030200", 1},
			} {
				if err := n.AddGPU(sysfsfixture.Function{BDF: f.bdf, Vendor: f.vendor, NUMA: f.numa}); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(n.Devices[f.bdf], "class"), []byte(f.class+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return n.Root
		}, want: []GPU{
			{PCI: "0000:17:00.0", Device: "2330", NUMA: -1, PCIRoot: "pci0000:17"},
			{PCI: "0000:19:00.0", Device: "2330", NUMA: 1, PCIRoot: "pci0000:19"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Discover(tc.build(t))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Discover:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name  string
		gpus  int
		o     Options
		inErr string
	}{
		{name: "no GPUs in sysfs", gpus: 0, inErr: "no NVIDIA GPU"},
		{name: "negative replicas", gpus: 2, o: Options{Replicas: -1}, inErr: "replicas -1"},
		{name: "missing sysfs", gpus: -1, inErr: "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.SysfsRoot = filepath.Join(t.TempDir(), "nonexistent")
			if tc.gpus >= 0 {
				tc.o.SysfsRoot = fixture(t, tc.gpus)
			}
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.inErr) {
				t.Fatalf("New: %v, want an error with %q", err, tc.inErr)
			}
		})
	}
}

func TestRegistersAndLists(t *testing.T) {
	tests := []struct {
		name     string
		gpus     int
		o        Options
		resource string
		want     []string
	}{
		{name: "one device per GPU, ID the PCI address, NUMA from sysfs", gpus: 4, resource: "nvidia.com/gpu", want: fourGPUs},
		{name: "replicas", gpus: 2, o: Options{Replicas: 2}, resource: "nvidia.com/gpu", want: []string{
			"0000:42:00.0::0@0/Healthy", "0000:42:00.0::1@0/Healthy", "0000:82:00.0::0@1/Healthy", "0000:82:00.0::1@1/Healthy",
		}},
		{name: "other resource name", gpus: 1, o: Options{Resource: "example.com/gpu"}, resource: "example.com/gpu", want: []string{"0000:42:00.0@0/Healthy"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := sockDir(t)
			k := startKubelet(t, dir)
			tc.o.PluginDir = dir
			p := runPlugin(t, fixture(t, tc.gpus), tc.o)
			eventually(t, "devices listed", func() bool { return reflect.DeepEqual(k.listed(tc.resource), tc.want) })
			regs := k.registrations()
			if len(regs) != 1 {
				t.Fatalf("%d registrations, want 1", len(regs))
			}
			r := regs[0]
			if r.ResourceName != tc.resource || r.Endpoint != filepath.Base(p.Socket()) || r.Version != pluginapi.Version || !r.Options.GetPreferredAllocationAvailable {
				t.Fatalf("registration %+v", r)
			}
		})
	}
}

func TestAllocate(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		req      [][]string // device IDs per container
		want     []string   // NVIDIA_VISIBLE_DEVICES per container
		code     codes.Code
	}{
		{name: "one GPU", req: [][]string{{"0000:42:00.0"}}, want: []string{"0000:42:00.0"}},
		{name: "GPUs on both NUMA nodes", req: [][]string{{"0000:42:00.0", "0000:c2:00.0"}}, want: []string{"0000:42:00.0,0000:c2:00.0"}},
		{name: "two containers", req: [][]string{{"0000:43:00.0"}, {"0000:82:00.0"}}, want: []string{"0000:43:00.0", "0000:82:00.0"}},
		{name: "replicas of one GPU name it once", replicas: 2, req: [][]string{{"0000:42:00.0::0", "0000:42:00.0::1", "0000:43:00.0::1"}},
			want: []string{"0000:42:00.0,0000:43:00.0"}},
		{name: "unknown device", req: [][]string{{"0000:99:00.0"}}, code: codes.InvalidArgument},
	}
	dir := sockDir(t)
	k := startKubelet(t, dir)
	sys := fixture(t, 4)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := "example.com/gpu-" + strings.ReplaceAll(tc.name, " ", "-")
			runPlugin(t, sys, Options{PluginDir: dir, Resource: res, Replicas: tc.replicas})
			eventually(t, "registration", func() bool { return k.client(res) != nil })
			req := &pluginapi.AllocateRequest{}
			for _, ids := range tc.req {
				req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIds: ids})
			}
			resp, err := k.client(res).Allocate(context.Background(), req)
			if tc.code != codes.OK {
				if status.Code(err) != tc.code {
					t.Fatalf("Allocate: %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.ContainerResponses {
				if len(c.Devices) > 0 || len(c.Mounts) > 0 || len(c.CdiDevices) > 0 || len(c.Annotations) > 0 || len(c.Envs) != 1 {
					t.Errorf("container response %+v: want only %s", c, VisibleDevicesEnv)
				}
				got = append(got, c.Envs[VisibleDevicesEnv])
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s = %q, want %q", VisibleDevicesEnv, got, tc.want)
			}
		})
	}
}

func TestPreferredAllocation(t *testing.T) {
	p4, err := New(Options{SysfsRoot: fixture(t, 4)})
	if err != nil {
		t.Fatal(err)
	}
	p4r, err := New(Options{SysfsRoot: fixture(t, 4), Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(p *Plugin) []string {
		var out []string
		for _, d := range p.Devices() {
			out = append(out, d.ID)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(out))) // order must not matter
		return out
	}
	tests := []struct {
		name      string
		p         *Plugin
		available []string
		must      []string
		size      int
		want      []string
	}{
		{name: "lowest IDs on one NUMA node", p: p4, available: ids(p4), size: 2, want: []string{"0000:42:00.0", "0000:43:00.0"}},
		{name: "required device's NUMA node first", p: p4, available: ids(p4), must: []string{"0000:c2:00.0"}, size: 2, want: []string{"0000:c2:00.0", "0000:82:00.0"}},
		{name: "spills to the other NUMA node when it must", p: p4, available: ids(p4), size: 3, want: []string{"0000:42:00.0", "0000:43:00.0", "0000:82:00.0"}},
		{name: "replicas spread over GPUs of the NUMA node", p: p4r, available: ids(p4r), size: 3,
			want: []string{"0000:42:00.0::0", "0000:43:00.0::0", "0000:42:00.0::1"}},
		{name: "fewer available than asked", p: p4, available: []string{"0000:82:00.0"}, size: 2, want: []string{"0000:82:00.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.p.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: tc.available, MustIncludeDeviceIDs: tc.must, AllocationSize: int32(tc.size)},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.ContainerResponses[0].DeviceIDs; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("preferred %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReRegistersAfterKubeletRestart(t *testing.T) {
	tests := []struct {
		name    string
		upFirst bool // kubelet is up when the plugin starts, then restarts
		wipe    bool // the restart wipes the plugin dir (kubelet's device manager does)
	}{
		{name: "kubelet wipes the plugin dir and recreates kubelet.sock", upFirst: true, wipe: true},
		{name: "kubelet.sock recreated, plugin socket kept", upFirst: true},
		{name: "kubelet comes up after the plugin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := sockDir(t)
			var k *fakeKubelet
			if tc.upFirst {
				k = startKubelet(t, dir)
			}
			// an hour's resync: the plugin dir's events alone must carry it
			p := runPlugin(t, fixture(t, 4), Options{PluginDir: dir, Resync: time.Hour})
			if tc.upFirst {
				eventually(t, "first registration", func() bool { return len(k.registrations()) > 0 })
				k = k.restart(t, tc.wipe)
			} else {
				time.Sleep(100 * time.Millisecond)
				k = startKubelet(t, dir)
			}
			eventually(t, "registration with the new kubelet", func() bool { return len(k.registrations()) > 0 })
			eventually(t, "devices listed to the new kubelet", func() bool { return reflect.DeepEqual(k.listed(DefaultResource), fourGPUs) })
			if _, err := os.Stat(p.Socket()); err != nil {
				t.Fatalf("plugin socket: %v", err)
			}
			resp, err := k.client(DefaultResource).Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:82:00.0"}}}})
			if err != nil || resp.ContainerResponses[0].Envs[VisibleDevicesEnv] != "0000:82:00.0" {
				t.Fatalf("Allocate after restart: %v %v", resp, err)
			}
			// once: nothing changed since
			time.Sleep(200 * time.Millisecond)
			if n := len(k.registrations()); n != 1 {
				t.Fatalf("%d registrations with the new kubelet, want 1", n)
			}
		})
	}
}
