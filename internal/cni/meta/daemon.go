package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/meta/wire"
)

// Daemon serves CNI calls from the shim with warm state: informer caches of
// the node's pods and every NAD, one PodResources connection, and libcni.
type Daemon struct {
	Socket  string
	Source  Source
	Devices DeviceLister
	Log     *slog.Logger
	// Status, when set, writes network-status after ADD has answered.
	AsyncStatus *StatusWriter
	// Exec runs the delegates' plugins (nil: as processes, as libcni does);
	// rdmanet-daemon passes inproc's, which runs rdmanet's own in-process.
	Exec invoke.Exec
}

// Limits of the daemon's socket server.
var (
	// RequestReadTimeout bounds reading one request: the shim writes it at once.
	RequestReadTimeout = 5 * time.Second
	// DrainTimeout bounds how long a stopping daemon waits for calls in flight.
	DrainTimeout = 30 * time.Second
)

// Serve listens on the socket until ctx ends, then waits (bounded by
// DrainTimeout) for the calls in flight and for pending network-status
// writes.
func (d *Daemon) Serve(ctx context.Context) error {
	if err := os.Remove(d.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", d.Socket, err)
	}
	lis, err := net.Listen("unix", d.Socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.Socket, err)
	}
	if err := os.Chmod(d.Socket, 0o600); err != nil {
		lis.Close()
		return fmt.Errorf("chmod %s: %w", d.Socket, err)
	}
	go func() {
		<-ctx.Done()
		lis.Close()
	}()
	var inflight sync.WaitGroup
	var serveErr error
	for {
		c, err := lis.Accept()
		if err != nil {
			if ctx.Err() == nil {
				serveErr = fmt.Errorf("accept on %s: %w", d.Socket, err)
			}
			break
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			d.serveConn(c)
		}()
	}
	_ = os.Remove(d.Socket)
	drained := make(chan struct{})
	go func() { inflight.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(DrainTimeout):
		d.Log.Warn("stopping with CNI calls still running", "waited", DrainTimeout)
	}
	if d.AsyncStatus != nil {
		sctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		d.AsyncStatus.Close(sctx)
		cancel()
	}
	return serveErr
}

// serveConn answers one call: read the request (the shim closes its write
// side after it), run it, write the response.
func (d *Daemon) serveConn(c net.Conn) {
	defer c.Close()
	var resp wire.Response
	_ = c.SetReadDeadline(time.Now().Add(RequestReadTimeout))
	var req wire.Request
	switch err := wire.Read(c, &req); {
	case err != nil:
		if errors.Is(err, wire.ErrTooLarge) {
			// read the rest (bounded by the deadline) so the shim gets this
			// answer instead of a connection reset
			_, _ = io.Copy(io.Discard, c)
		}
		resp.Error = types.NewError(types.ErrDecodingFailure, "rdmanet daemon: bad request: "+err.Error(), "")
	case req.Version != wire.Version:
		resp.Error = types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("rdmanet daemon speaks protocol v%d, the shim sent v%d; fix: install the rdmanet shim and daemon of one release", wire.Version, req.Version), "")
	default:
		// The call runs to completion even if the shim goes away: a
		// half-done ADD must still roll back, a DEL must finish.
		_ = c.SetReadDeadline(time.Time{})
		res, err := d.Call(context.Background(), req)
		if err != nil {
			resp.Error = asCNIError(err).(*types.Error)
		} else {
			resp.Result = res
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		d.Log.Error("encode response", "container", req.ContainerID, "err", err)
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(RequestReadTimeout))
	if _, err := c.Write(b); err != nil {
		d.Log.Warn("the shim left before the answer", "command", req.Command, "container", req.ContainerID, "err", err)
	}
}

// Call runs one CNI verb with the daemon's warm state.
func (d *Daemon) Call(ctx context.Context, req wire.Request) (json.RawMessage, error) {
	conf, err := ParseConfig(req.Config)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	p := &Plugin{Conf: conf, Source: d.Source, Devices: d.Devices, CNI: NewCNI(conf, req.Path, d.Exec), Log: d.Log.With("container", req.ContainerID), AsyncStatus: d.AsyncStatus}
	a := Args{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args, Path: req.Path}
	switch req.Command {
	case "ADD":
		res, err := p.Add(ctx, a)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	case "DEL":
		return nil, p.Del(ctx, a)
	case "CHECK":
		return nil, p.Check(ctx, a)
	case "STATUS":
		return nil, p.Status(ctx)
	}
	return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("rdmanet daemon: unknown command %q", req.Command), "")
}
