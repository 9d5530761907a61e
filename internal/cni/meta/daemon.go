package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

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
}

// Serve listens on the socket until ctx ends.
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
	mux := http.NewServeMux()
	mux.HandleFunc(wire.Path, d.handle)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err = srv.Serve(lis)
	_ = os.Remove(d.Socket)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (d *Daemon) handle(w http.ResponseWriter, r *http.Request) {
	var req wire.Request
	var resp wire.Response
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		resp.Error = types.NewError(types.ErrDecodingFailure, "rdmanet daemon: bad request: "+err.Error(), "")
		writeJSON(w, resp)
		return
	}
	res, err := d.Call(r.Context(), req)
	if err != nil {
		resp.Error = asCNIError(err).(*types.Error)
	} else {
		resp.Result = res
	}
	writeJSON(w, resp)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Call runs one CNI verb with the daemon's warm state.
func (d *Daemon) Call(ctx context.Context, req wire.Request) (json.RawMessage, error) {
	conf, err := ParseConfig(req.Config)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	p := &Plugin{Conf: conf, Source: d.Source, Devices: d.Devices, CNI: NewCNI(conf, req.Path), Log: d.Log.With("container", req.ContainerID)}
	a := Args{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args, Path: req.Path}
	// A runtime that gave up must not cancel a half-done ADD: rollback and
	// DEL run to completion within their own bounds.
	ctx = context.WithoutCancel(ctx)
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
