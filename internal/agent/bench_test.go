package agent_test

// Benchmarks of the node agent on a large fixture node: 8 ConnectX-6 Dx
// PFs × 64 VFs = 512 VFs in one exclusive pool. Run them with
// `make bench-agent`. They measure; they assert only that the work was done.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdmanet/rdmanet/internal/agent"
	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

const (
	benchPFs      = 8
	benchVFsPerPF = 64
	benchResource = "example.com/sriov_rdma"
	benchConfig   = `{"resourceList":[{"resourcePrefix":"example.com","resourceName":"sriov_rdma",
	  "selectors":[{"vendors":["15b3"],"drivers":["mlx5_core"],"isRdma":true}]}]}`
)

// benchNode writes 8 PFs × 64 VFs: PF i on bus 0x(i+1)1, its own PCIe root,
// NUMA node i/4, netdev ens<i>f0np0, RDMA on the PF and on every VF.
func benchNode(b *testing.B) (*sysfsfixture.Node, []sysfsfixture.Function, string) {
	b.Helper()
	root := filepath.Join(b.TempDir(), "sys")
	n, err := sysfsfixture.New(root)
	if err != nil {
		b.Fatal(err)
	}
	pfs := make([]sysfsfixture.Function, benchPFs)
	for i := range pfs {
		bus := (i+1)<<4 | 1
		pfs[i] = sysfsfixture.Function{
			BDF: fmt.Sprintf("0000:%02x:00.0", bus), Vendor: sysfsfixture.VendorMellanox,
			Device: sysfsfixture.DeviceCX6Dx, VFDevice: sysfsfixture.DeviceCX6DxVF, Driver: "mlx5_core",
			NUMA: i / 4, PCIRoot: fmt.Sprintf("pci0000:%02x", bus-1), Netdev: fmt.Sprintf("ens%df0np0", i),
			RDMADev: n.NextRDMAName(), IPv4: fmt.Sprintf("10.0.%d.1", i), TotalVFs: benchVFsPerPF, MTU: 9000,
		}
		if err := n.AddFunction(pfs[i]); err != nil {
			b.Fatal(err)
		}
	}
	for i := range pfs {
		if err := n.SetNumVFs(pfs[i], 0, benchVFsPerPF); err != nil {
			b.Fatal(err)
		}
		pfs[i].NumVFs = benchVFsPerPF
	}
	cfg := filepath.Join(b.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(benchConfig), 0o644); err != nil {
		b.Fatal(err)
	}
	return n, pfs, cfg
}

// BenchmarkDiscovery is one full discovery: inventory.Discover over the
// sysfs tree plus deviceplugin.Build of the pool (agent.Discover, the
// agent's rescan).
func BenchmarkDiscovery(b *testing.B) {
	n, _, cfg := benchNode(b)
	specs, err := agent.LoadConfig([]string{cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var devices int
	for b.Loop() {
		node, err := inventory.Discover(inventory.Options{SysfsRoot: n.Root, NetnsModeFlag: "exclusive"})
		if err != nil {
			b.Fatal(err)
		}
		pools, err := deviceplugin.Build(node, specs)
		if err != nil {
			b.Fatal(err)
		}
		devices = len(pools[0].Devices)
	}
	if devices != benchPFs*benchVFsPerPF {
		b.Fatalf("discovered %d VFs, want %d", devices, benchPFs*benchVFsPerPF)
	}
	b.ReportMetric(float64(devices), "VFs")
}

// benchAgent runs the agent on the big node (no kubelet: it serves without
// registering) and returns a client of the pool's socket.
func benchAgent(b *testing.B, cfg, sysRoot string, resync time.Duration) pluginapi.DevicePluginClient {
	b.Helper()
	pluginDir := b.TempDir()
	a, err := agent.New(agent.Options{
		SysfsRoot: sysRoot, ConfigPaths: []string{cfg}, PluginDir: pluginDir,
		DevInfoDir: filepath.Join(b.TempDir(), "devinfo"), NetnsModeFlag: "exclusive", Resync: resync,
		Logger: benchLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	sock := filepath.Join(pluginDir, deviceplugin.SocketName(benchResource))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("agent did not serve %s", sock)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return dial(b, sock)
}

// dial connects a Device Plugin API client to a pool socket, as kubelet does.
func dial(b *testing.B, sock string) pluginapi.DevicePluginClient {
	b.Helper()
	// The socket file exists from bind(), a moment before listen(): wait
	// for ready instead of failing on an early "connection refused".
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// BenchmarkAllocate is the latency of one Allocate gRPC call to the pool
// server (device specs, env, and a device-info file per VF written), as
// kubelet makes it, for 1 and 8 VFs per container: "server" is the pool
// server alone (deviceplugin.NewServer over one discovery), "agent" the
// server inside a running agent, which rescans the node every 500ms.
func BenchmarkAllocate(b *testing.B) {
	n, pfs, cfg := benchNode(b)
	var ids []string
	for _, pf := range pfs {
		for i := 0; i < benchVFsPerPF; i++ {
			ids = append(ids, sysfsfixture.VFBDF(pf.BDF, i))
		}
	}
	sort.Strings(ids)
	ctx := context.Background()
	clients := []struct {
		name   string
		client func(b *testing.B) pluginapi.DevicePluginClient
	}{
		{name: "server", client: func(b *testing.B) pluginapi.DevicePluginClient {
			specs, err := agent.LoadConfig([]string{cfg})
			if err != nil {
				b.Fatal(err)
			}
			snap, err := agent.Discover(agent.Options{SysfsRoot: n.Root, NetnsModeFlag: "exclusive"}, specs)
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			srv := deviceplugin.NewServer(snap.Pools[0], deviceplugin.ServerOptions{PluginDir: dir,
				DevInfoDir: filepath.Join(b.TempDir(), "devinfo"), RDMACM: true, Logger: benchLogger()})
			if err := srv.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(srv.Stop)
			return dial(b, srv.Socket())
		}},
		{name: "agent", client: func(b *testing.B) pluginapi.DevicePluginClient { return benchAgent(b, cfg, n.Root, 0) }},
	}
	for _, cl := range clients {
		b.Run(cl.name, func(b *testing.B) {
			c := cl.client(b)
			// Wait until the server holds the pool (first ListAndWatch answer).
			stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
			if err != nil {
				b.Fatal(err)
			}
			if r, err := stream.Recv(); err != nil || len(r.Devices) != len(ids) {
				b.Fatalf("ListAndWatch: %v devices, %v", len(r.GetDevices()), err)
			}
			for _, size := range []int{1, 8} {
				b.Run(fmt.Sprintf("VFs=%d", size), func(b *testing.B) {
					i := 0
					for b.Loop() {
						req := make([]string, size)
						for j := range req {
							req[j] = ids[(i+j)%len(ids)]
						}
						i += size
						resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: req}}})
						if err != nil {
							b.Fatal(err)
						}
						if got := len(resp.ContainerResponses[0].Devices); got < size {
							b.Fatalf("Allocate gave %d device nodes for %d VFs", got, size)
						}
					}
				})
			}
		})
	}
}

// BenchmarkHealthPropagation is the time from a PF link change on the node
// (operstate written) to the ListAndWatch update in which that PF's 64 VFs
// have the new health, seen by a gRPC client as kubelet sees it. The agent
// rescans every Resync, so the figure is about Resync/2 plus one discovery;
// it is reported for the default Resync (500ms) and a short one.
func BenchmarkHealthPropagation(b *testing.B) {
	for _, resync := range []time.Duration{0, 100 * time.Millisecond} {
		name := "resync=default"
		if resync > 0 {
			name = "resync=" + resync.String()
		}
		b.Run(name, func(b *testing.B) {
			n, pfs, cfg := benchNode(b)
			c := benchAgent(b, cfg, n.Root, resync)
			pf := pfs[3]
			vfs := map[string]bool{}
			for i := 0; i < benchVFsPerPF; i++ {
				vfs[sysfsfixture.VFBDF(pf.BDF, i)] = true
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
			if err != nil {
				b.Fatal(err)
			}
			// count of the PF's VFs with health h in one update
			count := func(r *pluginapi.ListAndWatchResponse, h string) int {
				k := 0
				for _, d := range r.Devices {
					if vfs[d.ID] && d.Health == h {
						k++
					}
				}
				return k
			}
			waitFor := func(h string) {
				for {
					r, err := stream.Recv()
					if err != nil {
						b.Fatal(err)
					}
					if count(r, h) == benchVFsPerPF {
						return
					}
				}
			}
			waitFor(pluginapi.Healthy)
			var total, worst time.Duration
			iters := 0
			states := []struct{ oper, health string }{{"down", pluginapi.Unhealthy}, {"up", pluginapi.Healthy}}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s := states[i%2]
				start := time.Now()
				if err := n.SetOperState(pf.Netdev, s.oper); err != nil {
					b.Fatal(err)
				}
				waitFor(s.health)
				d := time.Since(start)
				total += d
				worst = max(worst, d)
				iters++
			}
			b.ReportMetric(float64(total.Microseconds())/float64(iters)/1000, "ms/propagation")
			b.ReportMetric(float64(worst.Microseconds())/1000, "ms-max")
		})
	}
}

// benchLogger discards the agent's logs unless RDMANET_BENCH_LOG names a file.
func benchLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if p := os.Getenv("RDMANET_BENCH_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			w = f
		}
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
