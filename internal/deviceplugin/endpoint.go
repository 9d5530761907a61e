package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Limits of a device plugin's gRPC server (Endpoint). Its socket is
// root-only (0600), so only kubelet (root) talks to it; the limits bound
// what a confused or broken client can make the agent hold.
const (
	// MaxRecvMessage bounds a request: kubelet's largest is a
	// GetPreferredAllocation listing every available device, about 45
	// bytes per device, so about 450 KiB for the largest pool config
	// allows (10000 shared slots). Half gRPC's default of 4 MiB.
	MaxRecvMessage = 2 << 20
	// MaxSendMessage bounds an answer (a ListAndWatch of the whole pool);
	// kubelet's client receives at most 4 MiB by default.
	MaxSendMessage = 4 << 20
	// MaxStreams bounds the concurrent streams of one connection (kubelet
	// holds one ListAndWatch and makes unary calls).
	MaxStreams = 64
	// DefaultMaxConns bounds the connections at once (kubelet keeps one;
	// a restarted kubelet opens a new one while the old one closes).
	DefaultMaxConns = 16
	// HandshakeTimeout bounds a new connection's setup, so a client that
	// connects and sends nothing holds a connection slot only that long.
	HandshakeTimeout = 10 * time.Second
)

// Endpoint is the kubelet-facing side of one device plugin: a Device
// Plugin API implementation served on a root-only socket (0600) in
// kubelet's plugin dir, within the limits above, and registered with
// kubelet. Server serves a pool through one; the cluster tier's fake GPU
// plugin (test/cluster/fakegpu) serves its GPUs through another.
type Endpoint struct {
	Resource string
	// Socket is the path served, in kubelet's plugin dir (created
	// root-only, 0700, when missing).
	Socket string
	// MaxConns bounds the connections served at once (0: DefaultMaxConns);
	// more wait in the socket's backlog until one closes.
	MaxConns int
	Log      *slog.Logger // nil is slog.Default()

	mu   sync.Mutex
	grpc *grpc.Server
}

// Start listens on the socket (replacing a stale one) and serves impl in
// the background.
func (e *Endpoint) Start(impl pluginapi.DevicePluginServer) error {
	dir := filepath.Dir(e.Socket)
	// kubelet's dir: created root-only when missing, else left as it is
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("device plugin dir %s: %w", dir, err)
	}
	if err := os.Remove(e.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", e.Socket, err)
	}
	lis, err := net.Listen("unix", e.Socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", e.Socket, err)
	}
	if err := os.Chmod(e.Socket, 0o600); err != nil {
		lis.Close()
		return fmt.Errorf("chmod %s: %w", e.Socket, err)
	}
	maxConns := e.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	lis = netutil.LimitListener(lis, maxConns)
	g := grpc.NewServer(grpc.MaxRecvMsgSize(MaxRecvMessage), grpc.MaxSendMsgSize(MaxSendMessage),
		grpc.MaxConcurrentStreams(MaxStreams), grpc.ConnectionTimeout(HandshakeTimeout))
	pluginapi.RegisterDevicePluginServer(g, impl)
	e.mu.Lock()
	e.grpc = g
	e.mu.Unlock()
	go func() {
		if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			e.logger().Error("device plugin server stopped", "socket", e.Socket, "err", err)
		}
	}()
	return nil
}

// Stop ends serving (ListAndWatch streams end, which tells kubelet the
// resource is gone) and removes the socket.
func (e *Endpoint) Stop() {
	e.mu.Lock()
	g := e.grpc
	e.grpc = nil
	e.mu.Unlock()
	if g != nil {
		g.Stop()
	}
	_ = os.Remove(e.Socket)
}

// Register tells kubelet (its registration socket kubeletSocket) about the
// resource; kubelet then dials the socket.
func (e *Endpoint) Register(ctx context.Context, kubeletSocket string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("register %s with kubelet at %s: %w", e.Resource, kubeletSocket, err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(e.Socket),
		ResourceName: e.Resource,
		Options:      Options(),
	})
	if err != nil {
		return fmt.Errorf("register %s with kubelet at %s: %w", e.Resource, kubeletSocket, err)
	}
	return nil
}

func (e *Endpoint) logger() *slog.Logger {
	if e.Log == nil {
		return slog.Default()
	}
	return e.Log
}

// Options are the Device Plugin API options of rdmanet's device plugins:
// no PreStartContainer call, a GetPreferredAllocation call.
func Options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{PreStartRequired: false, GetPreferredAllocationAvailable: true}
}

// Base answers the Device Plugin API calls whose answer follows from
// Options (GetDevicePluginOptions, PreStartContainer); a plugin embeds it
// and implements ListAndWatch, GetPreferredAllocation and Allocate.
type Base struct {
	pluginapi.UnimplementedDevicePluginServer
}

// GetDevicePluginOptions implements the Device Plugin API.
func (Base) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return Options(), nil
}

// PreStartContainer is not required (PreStartRequired is false).
func (Base) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
