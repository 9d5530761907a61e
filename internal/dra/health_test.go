package dra

// Device health of prepared devices (health.go): the mapping of what the
// host's sysfs shows to kubelet's Healthy/Unhealthy/Unknown, the
// transitions counted and recorded as Events on the claim's pods, and the
// stream kubelet reads through the kubeletplugin helper's real gRPC server.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// healthRecorder is the metrics and the Event recorder of a test.
type healthRecorder struct {
	mu          sync.Mutex
	transitions []string // device=health
	events      []string // ns/pod type reason: message
}

func (r *healthRecorder) DeviceHealthChanged(device string, h kubeletplugin.HealthStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transitions = append(r.transitions, device+"="+string(h))
}

func (r *healthRecorder) DeviceHealthEvent(pod PodRef, unhealthy bool, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	typ := "Normal"
	if unhealthy {
		typ = "Warning"
	}
	r.events = append(r.events, fmt.Sprintf("%s/%s %s %s: %s", pod.Namespace, pod.Name, typ, reason, message))
}

func (r *healthRecorder) take() (transitions, events []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	transitions, events, r.transitions, r.events = r.transitions, r.events, nil, nil
	return transitions, events
}

// healthDriver is e's driver with rec as its metrics and Event recorder.
func (e *driverEnv) healthDriver(t *testing.T, rec *healthRecorder) *Driver {
	t.Helper()
	d, err := NewDriver(DriverOptions{NodeName: testNode, CDIDir: e.cdi, StateDir: e.state, DevInfoDir: e.devInfo,
		Claimed: e.claimed, DevicePlugin: e.dp, Pods: e.podGetter(), HealthEvents: rec, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	d.ObserveHealth(rec)
	e.rescan(t, d)
	return d
}

func healthOf(t *testing.T, d *Driver, device string) (kubeletplugin.HealthStatus, string) {
	t.Helper()
	rep, _ := d.health.report()
	for _, h := range rep.Devices {
		if h.DeviceName == device {
			return h.Health, h.Message
		}
	}
	t.Fatalf("device %s is not in the health report %+v", device, rep.Devices)
	return "", ""
}

// moveNetdevAway removes a VF's netdev from the host's view, as the CNI's
// move into the pod's network namespace does.
func moveNetdevAway(s *sysfsfixture.Standard, bdf string) error {
	nd := s.NetByBDF[bdf]
	if err := os.Remove(filepath.Join(s.Root, "class/net", nd)); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(s.Devices[bdf], "net", nd))
}

// TestDeviceHealthMapping: sysfs states of a prepared device's function
// (and its PF's) → the health kubelet gets, for a RoCE VF, an InfiniBand
// VF and a shared HCA, each prepared for one claim.
func TestDeviceHealthMapping(t *testing.T) {
	const (
		vf, vfPCI   = "vf-0000-41-00-2", "0000:41:00.2" // enp65s0f0v0, RoCE VF 0
		lastVF      = "vf-0000-41-00-5"                 // RoCE VF 3 (of 4)
		hca, hcaPCI = "hca-0000-81-00-0", "0000:81:00.0"
	)
	type cut func(t *testing.T, e *driverEnv) error
	ibVF := func(e *driverEnv) string { return sysfsfixture.VFBDF(e.s.IB.BDF, 0) }
	tests := []struct {
		name    string
		cut     cut
		cfg     string // pool configuration of the rescan (default cfgAll)
		device  func(e *driverEnv) string
		want    kubeletplugin.HealthStatus
		message string // substring; "" wants none
	}{
		{name: "healthy VF", device: func(*driverEnv) string { return vf }, want: kubeletplugin.HealthStatusHealthy},
		{name: "VF carrier lost", device: func(*driverEnv) string { return vf },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.SetOperState("enp65s0f0v0", "down") },
			want: kubeletplugin.HealthStatusUnhealthy, message: "netdev enp65s0f0v0 link is down: carrier lost"},
		{name: "VF lower layer down", device: func(*driverEnv) string { return vf },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.SetOperState("enp65s0f0v0", "lowerlayerdown") },
			want: kubeletplugin.HealthStatusUnhealthy, message: "netdev enp65s0f0v0 link is lowerlayerdown"},
		{name: "PF carrier lost", device: func(*driverEnv) string { return vf },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.SetOperState("enp65s0f0np0", "down") },
			want: kubeletplugin.HealthStatusUnhealthy, message: "PF enp65s0f0np0 (0000:41:00.0) link is down"},
		{name: "VF admin down (nobody brought it up) is no failure", device: func(*driverEnv) string { return vf },
			cut: func(t *testing.T, e *driverEnv) error {
				if err := e.s.SetOperState("enp65s0f0v0", "down"); err != nil {
					return err
				}
				return e.s.SetAdminUp("enp65s0f0v0", false)
			}, want: kubeletplugin.HealthStatusHealthy},
		{name: "VF RDMA port DOWN", device: func(*driverEnv) string { return vf },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.SetPortState(e.s.RDMAByBD[vfPCI], "1: DOWN") },
			want: kubeletplugin.HealthStatusUnhealthy, message: "/1 is DOWN"},
		{name: "InfiniBand VF port INIT (no subnet manager)", device: func(e *driverEnv) string { return DeviceName("vf", ibVF(e)) },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.SetPortState(e.s.RDMAByBD[ibVF(e)], "2: INIT") },
			want: kubeletplugin.HealthStatusUnhealthy, message: "/1 is INIT (no subnet manager has brought it to ACTIVE)"},
		{name: "port ACTIVE_DEFER is healthy", device: func(*driverEnv) string { return vf },
			cut: func(t *testing.T, e *driverEnv) error {
				return e.s.SetPortState(e.s.RDMAByBD[vfPCI], "5: ACTIVE_DEFER")
			},
			want: kubeletplugin.HealthStatusHealthy},
		{name: "VF netdev and RDMA device in the pod's netns: in use, not failed", device: func(*driverEnv) string { return vf },
			cut: func(t *testing.T, e *driverEnv) error {
				if err := moveNetdevAway(e.s, vfPCI); err != nil {
					return err
				}
				return e.s.RemoveRDMA(vfPCI)
			}, want: kubeletplugin.HealthStatusHealthy, message: "in the pod's network namespace"},
		{name: "VF in the pod, PF carrier lost", device: func(*driverEnv) string { return vf },
			cut: func(t *testing.T, e *driverEnv) error {
				if err := moveNetdevAway(e.s, vfPCI); err != nil {
					return err
				}
				return e.s.SetOperState("enp65s0f0np0", "down")
			}, want: kubeletplugin.HealthStatusUnhealthy, message: "PF enp65s0f0np0"},
		{name: "VF removed from the node", device: func(*driverEnv) string { return lastVF },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.SetNumVFs(e.s.RoCE, 4, 3) },
			want: kubeletplugin.HealthStatusUnhealthy, message: "PCI function 0000:41:00.5 is gone from the node"},
		{name: "shared HCA carrier lost", device: func(*driverEnv) string { return hca },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.SetOperState("ens8f0np0", "down") },
			want: kubeletplugin.HealthStatusUnhealthy, message: "netdev ens8f0np0 link is down"},
		{name: "shared HCA RDMA device gone", device: func(*driverEnv) string { return hca },
			cut:  func(t *testing.T, e *driverEnv) error { return e.s.RemoveRDMA(hcaPCI) },
			want: kubeletplugin.HealthStatusUnhealthy, message: "HCA 0000:81:00.0 has no RDMA device any more"},
		{name: "shared HCA netdev gone", device: func(*driverEnv) string { return hca },
			cut: func(t *testing.T, e *driverEnv) error {
				if err := os.Remove(filepath.Join(e.s.Root, "class/net/ens8f0np0")); err != nil {
					return err
				}
				return os.RemoveAll(filepath.Join(e.s.Devices[hcaPCI], "net/ens8f0np0"))
			}, cfg: "refresh", want: kubeletplugin.HealthStatusUnhealthy, message: "netdev ens8f0np0 of HCA 0000:81:00.0 is gone"},
		{name: "pool no longer configured: not watched", device: func(*driverEnv) string { return hca },
			cfg: cfgExclusive, want: kubeletplugin.HealthStatusUnknown, message: "no longer in an advertised pool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDriverEnv(t)
			rec := &healthRecorder{}
			d := e.healthDriver(t, rec)
			dev := tc.device(e)
			if r := prepare(t, d, newClaim("uid-1", "c", alloc{"r", dev})); r.Err != nil {
				t.Fatal(r.Err)
			}
			node, pools := nodeState(t, e.s.Root, "", cfgAll)
			if tc.cut != nil {
				if err := tc.cut(t, e); err != nil {
					t.Fatal(err)
				}
			}
			switch tc.cfg {
			case "refresh": // the agent's cheap pass re-reads the known netdev's attributes
				if node.RefreshHealth(e.s.Root) {
					t.Fatal("RefreshHealth: structural change")
				}
				d.Update(node, pools)
			case "":
				e.rescan(t, d)
			default:
				node, pools := nodeState(t, e.s.Root, "", tc.cfg)
				d.Update(node, pools)
			}
			got, msg := healthOf(t, d, dev)
			if got != tc.want || (tc.message == "") != (msg == "") || !strings.Contains(msg, tc.message) {
				t.Errorf("%s: health %s (%q), want %s (%q)", dev, got, msg, tc.want, tc.message)
			}
		})
	}
	t.Run("before the first scan: Unknown", func(t *testing.T) {
		e := newDriverEnv(t)
		d := e.driver(t)
		if r := prepare(t, d, newClaim("uid-1", "c", alloc{"r", vf})); r.Err != nil {
			t.Fatal(r.Err)
		}
		// a restarted agent: the checkpoint's claim is watched before any scan
		d2, err := NewDriver(DriverOptions{NodeName: testNode, CDIDir: e.cdi, StateDir: e.state, DevInfoDir: e.devInfo, DevicePlugin: e.dp, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if got, msg := healthOf(t, d2, vf); got != kubeletplugin.HealthStatusUnknown || !strings.Contains(msg, "has not scanned") {
			t.Errorf("health %s (%q), want Unknown", got, msg)
		}
		e.rescan(t, d2)
		if got, _ := healthOf(t, d2, vf); got != kubeletplugin.HealthStatusHealthy {
			t.Errorf("after the scan: %s, want Healthy", got)
		}
	})
}

// TestDeviceHealthTransitions: a prepared VF's link goes down and up: one
// transition each way for the metrics, a Warning and then a Normal Event
// on each pod of the claim naming pod and device; a device nobody
// prepared, and Unknown, get neither Events nor report entries.
func TestDeviceHealthTransitions(t *testing.T) {
	const vf = "vf-0000-41-00-2"
	e := newDriverEnv(t)
	rec := &healthRecorder{}
	d := e.healthDriver(t, rec)
	c := reserve(newClaim("uid-1", "c", alloc{"nic", vf}), podUsing("trainer-0"), podUsing("trainer-1"))
	if r := prepare(t, d, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	steps := []struct {
		name        string
		do          func() error
		transitions []string
		events      []string
	}{
		{name: "prepared: its health is reported, no transition", do: func() error { return nil }},
		{name: "an unprepared VF goes down: nothing", do: func() error { return e.s.SetOperState("enp65s0f0v1", "down") }},
		{name: "the prepared VF goes down", do: func() error { return e.s.SetOperState("enp65s0f0v0", "down") },
			transitions: []string{vf + "=Unhealthy"},
			events: []string{
				"training/trainer-0 Warning RDMADeviceUnhealthy: pod training/trainer-0: RDMA device " + vf + " (PCI 0000:41:00.2) of claim training/c is Unhealthy: netdev enp65s0f0v0 link is down: carrier lost",
				"training/trainer-1 Warning RDMADeviceUnhealthy: pod training/trainer-1: RDMA device " + vf + " (PCI 0000:41:00.2) of claim training/c is Unhealthy: netdev enp65s0f0v0 link is down: carrier lost",
			}},
		{name: "a rescan without change: nothing", do: func() error { return nil }},
		{name: "it comes back", do: func() error { return e.s.SetOperState("enp65s0f0v0", "up") },
			transitions: []string{vf + "=Healthy"},
			events: []string{
				"training/trainer-0 Normal RDMADeviceHealthy: pod training/trainer-0: RDMA device " + vf + " (PCI 0000:41:00.2) of claim training/c is Healthy again",
				"training/trainer-1 Normal RDMADeviceHealthy: pod training/trainer-1: RDMA device " + vf + " (PCI 0000:41:00.2) of claim training/c is Healthy again",
			}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatal(err)
		}
		e.rescan(t, d)
		tr, ev := rec.take()
		if !slices.Equal(tr, st.transitions) || !slices.Equal(ev, st.events) {
			t.Errorf("%s:\n transitions %q\n want        %q\n events %q\n want   %q", st.name, tr, st.transitions, ev, st.events)
		}
	}
	rep, _ := d.health.report()
	if len(rep.Devices) != 1 || rep.Devices[0].DeviceName != vf || rep.Devices[0].HealthCheckTimeout != DefaultHealthCheckTimeout {
		t.Errorf("report %+v: want the prepared device alone, with the default timeout", rep.Devices)
	}
	if err := unprepare(t, d, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if rep, _ := d.health.report(); len(rep.Devices) != 0 {
		t.Errorf("report after Unprepare %+v: want none", rep.Devices)
	}
}

// healthStream opens kubelet's side of the health service on the plugin's socket.
func healthStream(t *testing.T, ctx context.Context, socket string) drahealthv1.DRAResourceHealth_NodeWatchResourcesClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st, err := drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// recvHealth reads reports until the device's health is want and returns
// that entry; other devices and repeated reports are skipped.
func recvHealth(t *testing.T, st drahealthv1.DRAResourceHealth_NodeWatchResourcesClient, device string, want drahealthv1.HealthStatus) *drahealthv1.DeviceHealth {
	t.Helper()
	for {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("waiting for %s to be %s: %v", device, want, err)
		}
		for _, dh := range resp.GetDevices() {
			if dh.GetDevice().GetDeviceName() == device && dh.GetHealth() == want {
				return dh
			}
		}
	}
}

// pluginDirs are short kubelet directories (unix socket names are short).
func pluginDirs(t *testing.T) PluginPaths {
	t.Helper()
	base, err := os.MkdirTemp("", "rdrh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return PluginPaths{RegistrarDir: filepath.Join(base, "reg"), PluginDir: filepath.Join(base, "p")}
}

// TestWatchHealthStatusGRPC: kubelet's DRAResourceHealth client on the
// plugin's socket (the kubeletplugin helper's real gRPC server) gets the
// prepared VF Healthy, then Unhealthy with the reason when the fixture's
// VF netdev loses its carrier, then Healthy when it is back; the
// registration advertises the health service.
func TestWatchHealthStatusGRPC(t *testing.T) {
	const vf = "vf-0000-41-00-2"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newDriverEnv(t)
	d := e.healthDriver(t, &healthRecorder{})
	if r := prepare(t, d, reserve(newClaim("uid-1", "c", alloc{"nic", vf}), podUsing("trainer-0"))); r.Err != nil {
		t.Fatal(r.Err)
	}
	paths := pluginDirs(t)
	h, err := d.Start(ctx, fake.NewClientset(), paths)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	st := healthStream(t, ctx, filepath.Join(paths.PluginDir, "dra.sock"))

	got := recvHealth(t, st, vf, drahealthv1.HealthStatus_HEALTHY)
	if got.GetDevice().GetPoolName() != testNode || got.GetHealthCheckTimeoutSeconds() != int64(DefaultHealthCheckTimeout/time.Second) || got.GetLastUpdatedTime() == 0 {
		t.Errorf("first report %v: want pool %s, timeout %v, a last-updated time", got, testNode, DefaultHealthCheckTimeout)
	}
	if err := e.s.SetOperState("enp65s0f0v0", "down"); err != nil {
		t.Fatal(err)
	}
	e.rescan(t, d)
	got = recvHealth(t, st, vf, drahealthv1.HealthStatus_UNHEALTHY)
	if !strings.Contains(got.GetMessage(), "netdev enp65s0f0v0 link is down") {
		t.Errorf("Unhealthy report message %q: want the reason", got.GetMessage())
	}
	if err := e.s.SetOperState("enp65s0f0v0", "up"); err != nil {
		t.Fatal(err)
	}
	e.rescan(t, d)
	recvHealth(t, st, vf, drahealthv1.HealthStatus_HEALTHY)
}

func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(testWriter{t}, nil)) }
