package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/cni/meta/kube"
	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

// MetaServer serves CNI calls from the shim with warm state: informer caches of
// the node's pods and every NAD, one PodResources connection, and libcni.
type MetaServer struct {
	Socket  string
	Source  meta.Source
	Devices meta.DeviceLister
	Log     *slog.Logger
	// Status, when set, writes network-status after ADD has answered.
	AsyncStatus *StatusWriter
	// Exec runs the delegates' plugins (nil: as processes, as libcni does);
	// rdmanet-daemon passes inproc's, which runs rdmanet's own in-process.
	Exec invoke.Exec
	// Observer counts DEL attempts, releases and recovered panics (the
	// daemon's metrics); nil: logs only.
	Observer meta.Observer
	// RequestTimeout is the deadline of a call whose request carries none
	// (a shim of an older release); 0: the config's addTimeout (ADD, CHECK,
	// STATUS) or delTimeout (DEL, GC).
	RequestTimeout time.Duration
	// Retry, when set, is the config whose pending DELs (its cniDir) the
	// daemon retries every RetryInterval, each record with backoff
	// (RetryBackoff doubling up to RetryMaxBackoff).
	Retry                         *meta.NetConf
	RetryInterval                 time.Duration
	RetryBackoff, RetryMaxBackoff time.Duration
	// Events, when set, records a Warning Event on the pod of every failed
	// ADD (the per-call plugin records none: it would pay an API client and
	// a broadcaster on every exec).
	Events kube.EventRecorder

	warned  sync.Map    // config warnings already logged
	serving atomic.Bool // Serve is accepting calls
}

// Serving reports whether Serve is listening on the socket and accepting
// calls (for the daemon's health endpoints).
func (d *MetaServer) Serving() bool { return d.serving.Load() }

// Limits of the daemon's socket server.
var (
	// RequestReadTimeout bounds reading one request: the shim writes it at once.
	RequestReadTimeout = 5 * time.Second
	// DrainTimeout bounds how long a stopping daemon waits for calls in flight.
	DrainTimeout = 30 * time.Second
	// AnswerMargin is kept from a request's timeout for the answer to reach
	// the shim before the shim stops waiting.
	AnswerMargin = time.Second
	// DefaultRetryInterval is how often the daemon looks for pending DELs.
	DefaultRetryInterval = 5 * time.Second
)

// Serve listens on the socket until ctx ends, then waits (bounded by
// DrainTimeout) for the calls in flight and for pending network-status
// writes.
func (d *MetaServer) Serve(ctx context.Context) error {
	lis, err := sockserve.Listen(d.Socket)
	if err != nil {
		return err
	}
	retryDone := make(chan struct{})
	if d.Retry != nil {
		go func() { defer close(retryDone); d.retryLoop(ctx) }()
	} else {
		close(retryDone)
	}
	srv := &sockserve.Server{Handle: d.serveConn, Drain: DrainTimeout,
		OnPanic: func(r any) { _ = meta.RecoverPanic(d.Log, d.Observer, "rdmanet daemon: connection", r) }}
	d.serving.Store(true)
	drained, serveErr := srv.Serve(ctx, lis)
	d.serving.Store(false)
	if !drained {
		d.Log.Warn("stopping with CNI calls still running", "waited", DrainTimeout)
	}
	if d.AsyncStatus != nil {
		sctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		d.AsyncStatus.Close(sctx)
		cancel()
	}
	<-retryDone
	return serveErr
}

// retryLoop retries pending DELs until ctx ends.
func (d *MetaServer) retryLoop(ctx context.Context) {
	interval := d.RetryInterval
	if interval <= 0 {
		interval = DefaultRetryInterval
	}
	p := &meta.Plugin{Conf: d.Retry, Log: d.Log.With("job", "del-retry"), Exec: d.Exec, CNI: meta.NewCNI(d.Retry, "", d.Exec),
		Observer: d.Observer, RetryBackoff: d.RetryBackoff, RetryMaxBackoff: d.RetryMaxBackoff}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		d.retryOnce(ctx, p)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *MetaServer) retryOnce(ctx context.Context, p *meta.Plugin) {
	defer func() {
		if r := recover(); r != nil {
			_ = meta.RecoverPanic(d.Log, d.Observer, "rdmanet daemon: DEL retry", r)
		}
	}()
	res, err := p.RetryPending(ctx, false)
	if err != nil {
		d.Log.Warn("pending DEL retries failed; retrying later", "pending", res.Pending, "retried", res.Retried, "released", res.Released, "err", err)
	} else if res.Retried > 0 {
		d.Log.Info("pending DELs retried", "pending", res.Pending, "retried", res.Retried, "released", res.Released)
	}
}

// serveConn answers one call: read the request (the shim closes its write
// side after it), run it, write the response. A panic anywhere in the call
// becomes a CNI error for this call only.
func (d *MetaServer) serveConn(c net.Conn) {
	received := time.Now()
	var req daemonclient.Request
	err := daemonclient.Answer(c, RequestReadTimeout, &req, func(readErr error) any {
		var resp daemonclient.Response
		switch {
		case readErr != nil:
			resp.Error = types.NewError(types.ErrDecodingFailure, "rdmanet daemon: bad request: "+readErr.Error(), "")
		case req.Version != daemonclient.Version:
			resp.Error = types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("rdmanet daemon speaks protocol v%d, the shim sent v%d; fix: install the rdmanet shim and daemon of one release", daemonclient.Version, req.Version), "")
		default:
			// The call runs to completion even if the shim goes away (a
			// half-done ADD must still roll back, a DEL must finish), but not
			// past its deadline: the shim's timeout, else RequestTimeout, else
			// the config's. Delegate processes still running then are killed.
			ctx, cancel := d.requestContext(received, req)
			res, err := d.safeCall(ctx, req)
			cancel()
			if c := meta.CallObserverOf(d.Observer); c != nil {
				c.Call(req.Command, time.Since(received), err)
			}
			if err != nil {
				resp.Error = meta.AsCNIError(err).(*types.Error)
			} else {
				resp.Result = res
			}
		}
		return resp
	})
	if err != nil {
		d.Log.Warn("the shim left before the answer", "command", req.Command, "container", req.ContainerID, "err", err)
	}
}

// requestContext is the call's context: with the shim's deadline (less
// AnswerMargin) or RequestTimeout; without either, Call applies the
// config's timeouts.
func (d *MetaServer) requestContext(received time.Time, req daemonclient.Request) (context.Context, context.CancelFunc) {
	switch {
	case req.TimeoutMs > 0:
		t := time.Duration(req.TimeoutMs)*time.Millisecond - AnswerMargin
		t = max(t, AnswerMargin)
		return context.WithDeadline(context.Background(), received.Add(t))
	case d.RequestTimeout > 0:
		return context.WithDeadline(context.Background(), received.Add(d.RequestTimeout))
	}
	return context.WithCancel(context.Background())
}

// safeCall is Call with a panic turned into this call's error (logged with
// its stack). Panics inside network-namespace callbacks reach here too:
// nsguard raises them again on this goroutine.
func (d *MetaServer) safeCall(ctx context.Context, req daemonclient.Request) (res json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, meta.RecoverPanic(d.Log, d.Observer, fmt.Sprintf("rdmanet daemon: %s container %s", req.Command, req.ContainerID), r)
		}
	}()
	return d.Call(ctx, req)
}

// Call runs one CNI verb with the daemon's warm state.
func (d *MetaServer) Call(ctx context.Context, req daemonclient.Request) (json.RawMessage, error) {
	var conf *meta.NetConf
	switch req.Command {
	case "DEL", "GC":
		// DEL works from the cache; the config's state must not fail it
		conf = meta.ParseDelConfig(req.Config)
	default:
		var err error
		if conf, err = meta.ParseConfig(req.Config); err != nil {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
		}
	}
	for _, w := range conf.Warnings {
		if _, seen := d.warned.LoadOrStore(w, true); !seen {
			d.Log.Warn(w, "container", req.ContainerID)
		}
	}
	// The call's values are checked and its CNI_ARGS parsed here, once:
	// the plugin, the log and the Events recorder take the pod from the Call.
	var call meta.Call
	switch req.Command {
	case "ADD", "DEL", "CHECK":
		var err error
		call, err = meta.ParseCall(req.Command, meta.Args{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args, Path: req.Path})
		if err != nil {
			if req.Command == "ADD" {
				d.attachFailed(call, err)
			}
			return nil, err
		}
	}
	p := &meta.Plugin{Conf: conf, Source: d.Source, Devices: d.Devices, Exec: d.Exec, CNI: meta.NewCNI(conf, req.Path, d.Exec), Log: d.Log.With(callAttrs(req.ContainerID, call)...),
		Observer: d.Observer, RetryBackoff: d.RetryBackoff, RetryMaxBackoff: d.RetryMaxBackoff}
	if d.AsyncStatus != nil { // not a nil *StatusWriter in the interface
		p.AsyncStatus = d.AsyncStatus
	}
	if _, ok := ctx.Deadline(); !ok && req.Command != "DEL" && req.Command != "GC" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, conf.AddTimeoutDur)
		defer cancel()
	}
	switch req.Command {
	case "ADD":
		res, err := p.Add(ctx, call)
		if err != nil {
			d.attachFailed(call, err)
			return nil, err
		}
		return json.Marshal(res)
	case "DEL":
		return nil, p.Del(ctx, call)
	case "GC":
		return nil, p.GC(ctx)
	case "CHECK":
		return nil, p.Check(ctx, call)
	case "STATUS":
		return nil, p.Status(ctx)
	}
	return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("rdmanet daemon: unknown command %q", req.Command), "")
}

// callAttrs are the log attributes of a call: its container and the pod of
// its Call (none for GC and STATUS).
func callAttrs(containerID string, c meta.Call) []any {
	attrs := []any{"container", containerID}
	if c.HasPod {
		attrs = append(attrs, "pod_namespace", c.Pod.Namespace, "pod_name", c.Pod.Name)
	}
	return attrs
}

// attachFailed hands a failed ADD to the Events recorder with the pod of
// its Call (a call whose CNI_ARGS do not parse has no pod to name).
func (d *MetaServer) attachFailed(c meta.Call, err error) {
	if d.Events == nil || !c.HasPod {
		return
	}
	d.Events.AttachFailed(c.Pod, c.ContainerID, err)
}
