package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
)

// fakeKubelet serves the PodResources API on a unix socket as kubelet does
// (one pod, one device) and counts the connections it accepts.
type fakeKubelet struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	accepted atomic.Int64
	srv      *grpc.Server
}

func (k *fakeKubelet) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	return &podresourcesapi.GetPodResourcesResponse{PodResources: &podresourcesapi.PodResources{Name: req.PodName, Namespace: req.PodNamespace,
		Containers: []*podresourcesapi.ContainerResources{{Name: "c", Devices: []*podresourcesapi.ContainerDevices{
			{ResourceName: "example.com/sriov_rdma", DeviceIds: []string{"0000:41:00.2"}}}}}}}, nil
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// startKubelet serves k on socket until stop (or the test's end).
func startKubelet(t *testing.T, socket string) (k *fakeKubelet, stop func()) {
	t.Helper()
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	k = &fakeKubelet{srv: grpc.NewServer()}
	podresourcesapi.RegisterPodResourcesListerServer(k.srv, k)
	go func() { _ = k.srv.Serve(countingListener{Listener: lis, n: &k.accepted}) }()
	t.Cleanup(k.srv.Stop)
	return k, k.srv.Stop
}

// waitAccepted waits (bounded: the test fails rather than hangs) until
// kubelet has accepted a connection, with no call made meanwhile.
func waitAccepted(t *testing.T, k *fakeKubelet, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); k.accepted.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the daemon never dialed kubelet's PodResources socket before a call", what)
		}
	}
}

// connectStatic is Run's wiring of the meta server (connect) for a static
// source and kubelet's socket.
func connectStatic(t *testing.T, socket string) *MetaServer {
	t.Helper()
	conf, err := meta.ParseConfig(fmt.Appendf(nil, `{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","clusterNetwork":"k8s-pod-network",
		"cniDir":%q,"podResourcesSocket":%q,"source":{"type":"static","dir":%q}}`, t.TempDir(), socket, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	d := &MetaServer{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var ready atomic.Bool
	release, err := d.connect(context.Background(), Config{StatusWrite: "sync"}, conf, nil, &ready)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return d
}

// podDevices is the PodResources lookup of an ADD.
func podDevices(d *MetaServer) (*meta.Allocation, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.Devices.PodDevices(ctx, "ai", "trainer-0")
}

// TestPodResourcesDialedAtStart (issue 32): the daemon dials kubelet's
// PodResources socket when it starts, not on the first ADD, so a burst of
// ADDs does not wait on one connect; the first ADD's lookup uses the
// connection already made. A kubelet that comes (or comes back) later is
// dialed again without a call, and while it is away a lookup fails at once
// rather than waiting out the call's deadline.
func TestPodResourcesDialedAtStart(t *testing.T) {
	t.Run("kubelet up before the daemon", func(t *testing.T) {
		socket := filepath.Join(t.TempDir(), "kubelet.sock")
		k, _ := startKubelet(t, socket)
		d := connectStatic(t, socket)
		waitAccepted(t, k, "at start")
		alloc, err := podDevices(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := alloc.Devices["example.com/sriov_rdma"]; len(got) != 1 || got[0] != "0000:41:00.2" {
			t.Fatalf("devices %v", alloc.Devices)
		}
		if n := k.accepted.Load(); n != 1 {
			t.Fatalf("kubelet accepted %d connections, want the one made at start (the ADD dialed again)", n)
		}
	})
	t.Run("kubelet comes after the daemon, then restarts", func(t *testing.T) {
		socket := filepath.Join(t.TempDir(), "kubelet.sock")
		d := connectStatic(t, socket)
		_, err := podDevices(d)
		if err == nil || status.Code(errors.Unwrap(err)) != codes.Unavailable {
			t.Fatalf("lookup without kubelet: err = %v, want Unavailable at once (not the call's deadline)", err)
		}
		k, stop := startKubelet(t, socket)
		waitAccepted(t, k, "kubelet started after the daemon")
		if _, err := podDevices(d); err != nil {
			t.Fatal(err)
		}
		stop() // kubelet restarts: a new socket, a new server
		k2, _ := startKubelet(t, socket)
		waitAccepted(t, k2, "kubelet restarted")
		if _, err := podDevices(d); err != nil {
			t.Fatal(err)
		}
		if n := k2.accepted.Load(); n != 1 {
			t.Fatalf("the restarted kubelet accepted %d connections, want 1", n)
		}
	})
}
