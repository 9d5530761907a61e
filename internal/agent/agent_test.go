package agent

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// registrar is a kubelet registration endpoint built on k8s.io/kubelet's
// generated API; it records what registers. (The real kubelet device
// manager drives the agent in the test/kubelet module.)
type registrar struct {
	pluginapi.UnimplementedRegistrationServer
	mu   sync.Mutex
	reqs []*pluginapi.RegisterRequest
	srv  *grpc.Server
	// hold, when set, makes Register wait until it is closed (a hung
	// kubelet); arrived then gets a value per call that reached it.
	hold    chan struct{}
	arrived chan struct{}
}

func (r *registrar) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if r.hold != nil {
		select {
		case r.arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return &pluginapi.Empty{}, nil
}

func (r *registrar) count(resource string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.reqs {
		if q.ResourceName == resource {
			n++
		}
	}
	return n
}

func startRegistrar(t *testing.T, sock string) *registrar {
	return startRegistrarHolding(t, sock, nil)
}

func startRegistrarHolding(t *testing.T, sock string, hold chan struct{}) *registrar {
	t.Helper()
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	r := &registrar{srv: grpc.NewServer(), hold: hold, arrived: make(chan struct{}, 16)}
	pluginapi.RegisterRegistrationServer(r.srv, r)
	go func() { _ = r.srv.Serve(lis) }()
	t.Cleanup(r.srv.Stop)
	return r
}

type env struct {
	node    *sysfsfixture.Standard
	dir     string // device plugin dir
	devinfo string
	config  string
	agent   *Agent
	reg     *registrar
	cancel  context.CancelFunc
	done    chan error
}

const seedSriov = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma","selectors":[{"vendors":["15b3"],"pfNames":["enp65s0f0np0"],"isRdma":true}]}]}`

func start(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	node, err := sysfsfixture.NewStandard(filepath.Join(base, "sys"), sysfsfixture.StandardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{node: node, dir: filepath.Join(base, "dp"), devinfo: filepath.Join(base, "devinfo"), config: filepath.Join(base, "cfg", "config.json")}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(e.config), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte(seedSriov), 0o644); err != nil {
		t.Fatal(err)
	}
	e.reg = startRegistrar(t, filepath.Join(e.dir, "kubelet.sock"))
	e.agent, err = New(Options{SysfsRoot: node.Root, ConfigPaths: []string{e.config}, PluginDir: e.dir, DevInfoDir: e.devinfo,
		NetnsModeFlag: "exclusive", Resync: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-e.done
	})
	eventually(t, "registration", func() bool { return e.reg.count("example.com/sriov_rdma") == 1 })
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) client(t *testing.T) pluginapi.DevicePluginClient {
	t.Helper()
	sock := filepath.Join(e.dir, deviceplugin.SocketName("example.com/sriov_rdma"))
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// watcher collects ListAndWatch updates.
type watcher struct {
	mu   sync.Mutex
	last []*pluginapi.Device
	n    int
}

func (w *watcher) healthy() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := 0
	for _, d := range w.last {
		if d.Health == pluginapi.Healthy {
			h++
		}
	}
	return len(w.last), h
}

func watch(t *testing.T, c pluginapi.DevicePluginClient) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{}
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			w.mu.Lock()
			w.last, w.n = resp.Devices, w.n+1
			w.mu.Unlock()
		}
	}()
	return w
}

func TestAgentServesHealthAndMembershipChanges(t *testing.T) {
	e := start(t)
	w := watch(t, e.client(t))
	state := func(total, healthy int) func() bool {
		return func() bool { a, b := w.healthy(); return a == total && b == healthy }
	}
	eventually(t, "16 healthy VFs listed", state(16, 16))

	steps := []struct {
		name           string
		do             func() error
		total, healthy int
	}{
		{"PF link down: every VF unhealthy", func() error { return e.node.SetOperState("enp65s0f0np0", "down") }, 16, 0},
		{"PF link back", func() error { return e.node.SetOperState("enp65s0f0np0", "up") }, 16, 16},
		{"one VF loses its RDMA device", func() error { return e.node.RemoveRDMA(sysfsfixture.VFBDF(e.node.RoCE.BDF, 2)) }, 16, 15},
		{"RDMA device returns", func() error {
			return e.node.RestoreRDMA(sysfsfixture.VFBDF(e.node.RoCE.BDF, 2), "mlx5_6", sysfsfixture.Ethernet)
		}, 16, 16},
		{"sriov_numvfs 16 -> 12", func() error { return e.node.SetNumVFs(e.node.RoCE, 16, 12) }, 12, 12},
		{"sriov_numvfs 12 -> 16", func() error { return e.node.SetNumVFs(e.node.RoCE, 12, 16) }, 16, 16},
		{"config narrowed to VFs 0-3", func() error {
			return os.WriteFile(e.config, []byte(strings.Replace(seedSriov, `"enp65s0f0np0"`, `"enp65s0f0np0#0-3"`, 1)), 0o644)
		}, 4, 4},
		{"broken config keeps the previous pools", func() error { return os.WriteFile(e.config, []byte(`{"resourceList": [`), 0o644) }, 4, 4},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		eventually(t, st.name, state(st.total, st.healthy))
	}
	eventually(t, "broken config recorded as rejected", func() bool {
		e.agent.mu.Lock()
		defer e.agent.mu.Unlock()
		return e.agent.configError != nil
	})
}

func TestAgentAllocateAndPreferred(t *testing.T) {
	e := start(t)
	c := e.client(t)
	ctx := context.Background()
	vf0, vf1 := sysfsfixture.VFBDF(e.node.RoCE.BDF, 0), sysfsfixture.VFBDF(e.node.RoCE.BDF, 1)
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vf0, vf1}}}})
	if err != nil {
		t.Fatal(err)
	}
	car := resp.ContainerResponses[0]
	if got := car.Envs["PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA"]; got != vf0+","+vf1 {
		t.Fatalf("env = %q", got)
	}
	var paths []string
	for _, d := range car.Devices {
		paths = append(paths, d.HostPath)
		if d.ContainerPath != d.HostPath || d.Permissions != "rw" {
			t.Fatalf("device spec %+v", d)
		}
	}
	want := "/dev/infiniband/issm4,/dev/infiniband/umad4,/dev/infiniband/uverbs4,/dev/infiniband/issm5,/dev/infiniband/umad5,/dev/infiniband/uverbs5,/dev/infiniband/rdma_cm"
	if strings.Join(paths, ",") != want {
		t.Fatalf("device nodes = %v\nwant %s", paths, want)
	}
	info, err := devinfo.Read(e.devinfo, "example.com/sriov_rdma", vf1)
	if err != nil || info == nil || info.Pci.PciAddress != vf1 || info.Pci.PfPciAddress != e.node.RoCE.BDF || info.Pci.RdmaDevice != "mlx5_5" {
		t.Fatalf("device-info = %+v, %v", info, err)
	}
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:99:00.9"}}}}); err == nil || !strings.Contains(err.Error(), "0000:99:00.9") {
		t.Fatalf("unknown device: %v", err)
	}
	pref, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: []string{sysfsfixture.VFBDF(e.node.RoCE.BDF, 9), vf1, vf0}, AllocationSize: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := pref.ContainerResponses[0].DeviceIDs; len(got) != 2 || got[0] != vf0 || got[1] != vf1 {
		t.Fatalf("preferred = %v", got)
	}
	opts, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil || !opts.GetPreferredAllocationAvailable || opts.PreStartRequired {
		t.Fatalf("options = %+v, %v", opts, err)
	}
}

// kubeletRestarts stops the registrar and wipes the device-plugin dir, as
// kubelet's device manager does when it starts; the caller starts the new one.
func (e *env) kubeletRestarts(t *testing.T) {
	t.Helper()
	e.reg.srv.Stop()
	ents, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range ents {
		if err := os.Remove(filepath.Join(e.dir, en.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAgentReRegistersAfterKubeletRestart(t *testing.T) {
	e := start(t)
	sock := filepath.Join(e.dir, deviceplugin.SocketName("example.com/sriov_rdma"))
	// kubelet stops, wipes the device-plugin dir (as its device manager does
	// on start), and comes back with a new registration socket.
	e.kubeletRestarts(t)
	reg2 := startRegistrar(t, filepath.Join(e.dir, "kubelet.sock"))
	eventually(t, "re-registration", func() bool { return reg2.count("example.com/sriov_rdma") == 1 })
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("plugin socket not recreated: %v", err)
	}
	w := watch(t, e.client(t))
	eventually(t, "devices listed after restart", func() bool { n, h := w.healthy(); return n == 16 && h == 16 })
}

// TestAgentAnswersWhileKubeletHangsInRegistration: a kubelet that accepts
// the registration call but does not answer must not stall the agent's
// readers (Last) or its device servers; registration completes when
// kubelet answers.
func TestAgentAnswersWhileKubeletHangsInRegistration(t *testing.T) {
	e := start(t)
	// kubelet restarts (wiping the device-plugin dir) and then hangs in Register
	e.kubeletRestarts(t)
	hold := make(chan struct{})
	reg2 := startRegistrarHolding(t, filepath.Join(e.dir, "kubelet.sock"), hold)
	// wait until the agent is inside Register (the call reached kubelet)
	select {
	case <-reg2.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not try to register with the restarted kubelet")
	}
	got := make(chan *Snapshot, 1)
	go func() { got <- e.agent.Last() }()
	select {
	case s := <-got:
		if s == nil || len(s.Pools) == 0 {
			t.Fatalf("Last() = %+v, want the current pools", s)
		}
	case <-time.After(3 * time.Second):
		close(hold)
		t.Fatal("Last() blocked while a kubelet registration was hanging")
	}
	w := watch(t, e.client(t))
	eventually(t, "devices listed during the hung registration", func() bool { n, _ := w.healthy(); return n == 16 })
	close(hold)
	eventually(t, "registration after kubelet answers", func() bool { return reg2.count("example.com/sriov_rdma") == 1 })
}

func TestAgentStopsServingRemovedPool(t *testing.T) {
	e := start(t)
	sock := filepath.Join(e.dir, deviceplugin.SocketName("example.com/sriov_rdma"))
	if err := os.WriteFile(e.config, []byte(`{"configList":[{"resourceName":"s","rdmaHcaMax":3,"selectors":{"ifNames":["ens8f0np0"]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// the shared pool is not advertised (netns mode exclusive) and the old
	// exclusive pool is gone: its socket must disappear.
	eventually(t, "socket removal", func() bool { _, err := os.Stat(sock); return os.IsNotExist(err) })
	e.cancel()
	if err := <-e.done; err != nil {
		t.Fatal(err)
	}
	e.done <- nil // for Cleanup
}

func TestNewRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	if err := os.WriteFile(p, []byte(`{"resourceList":[{"resourceName":"r","selectors":{"needVhostNet":true}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{"no config", nil, "no pool configuration"},
		{"missing file", []string{filepath.Join(dir, "nope.json")}, "nope.json"},
		{"invalid selector", []string{p}, "needVhostNet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{ConfigPaths: tc.paths, PluginDir: dir})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
