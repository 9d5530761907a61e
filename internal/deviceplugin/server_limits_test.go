package deviceplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
)

// startLimited serves a small exclusive pool on a socket in a fresh dir.
func startLimited(t *testing.T, maxConns int) *Server {
	t.Helper()
	pool := &Pool{Resource: "example.com/sriov_rdma", Kind: string(config.Exclusive), Spec: config.Pool{Kind: config.Exclusive},
		Devices: []Device{{ID: "0000:41:00.2", PCI: "0000:41:00.2", NUMA: -1, Health: pluginapi.Healthy}}}
	dir := filepath.Join(t.TempDir(), "device-plugins")
	s := NewServer(pool, ServerOptions{PluginDir: dir, MaxConns: maxConns})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func dialPlugin(t *testing.T, socket string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// TestServerSocketIsRootOnly: the pool's socket is 0600, a dir the server
// creates is 0700.
func TestServerSocketIsRootOnly(t *testing.T) {
	s := startLimited(t, 0)
	for p, want := range map[string]os.FileMode{s.Socket(): 0o600, filepath.Dir(s.Socket()): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", p, fi.Mode().Perm(), want)
		}
	}
}

// TestServerRefusesOversizeMessages: a request over MaxRecvMessage is
// refused with ResourceExhausted before any handler runs; one under it is
// served.
func TestServerRefusesOversizeMessages(t *testing.T) {
	s := startLimited(t, 0)
	c := dialPlugin(t, s.Socket())
	ids := func(total int) []string {
		id := strings.Repeat("x", 1000)
		out := make([]string, 0, total/len(id)+1)
		for n := 0; n < total; n += len(id) + 3 {
			out = append(out, id)
		}
		return out
	}
	tests := []struct {
		name string
		call func(ctx context.Context) error
		want codes.Code
	}{
		{name: "Allocate over the limit", want: codes.ResourceExhausted, call: func(ctx context.Context) error {
			_, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids(MaxRecvMessage + 1024)}}})
			return err
		}},
		{name: "GetPreferredAllocation over the limit", want: codes.ResourceExhausted, call: func(ctx context.Context) error {
			_, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: ids(2 * MaxRecvMessage), AllocationSize: 1}}})
			return err
		}},
		{name: "large but within the limit is served", want: codes.OK, call: func(ctx context.Context) error {
			_, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: ids(MaxRecvMessage / 2), AllocationSize: 1}}})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := tc.call(ctx)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
			if tc.want == codes.ResourceExhausted && !strings.Contains(err.Error(), "larger than max") {
				t.Errorf("error %v does not say the message is too large", err)
			}
		})
	}
}

// TestServerConnectionCap: with MaxConns connections open, the next client
// waits (its call runs into its deadline); when one closes, it is served.
func TestServerConnectionCap(t *testing.T) {
	const maxConns = 2
	s := startLimited(t, maxConns)
	var raw []net.Conn
	for range maxConns {
		c, err := net.Dial("unix", s.Socket())
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, c)
		t.Cleanup(func() { c.Close() })
	}
	c := dialPlugin(t, s.Socket())
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	_, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call beyond the connection cap: %v, want DeadlineExceeded", err)
	}
	raw[0].Close()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("call after a connection closed: %v", err)
	}
}
