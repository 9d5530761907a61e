// Package plugind is rdmanet-daemon's plugin socket: exec'd rdmanet
// delegate plugins (sriov, rdma, rdmanet-ipam, also as whereabouts) hand
// their calls to it (package daemonclient), and it runs them in-process with the
// daemon's warm state (API clients, caches) — under the same request limits
// and per-request deadlines as the meta shim's calls. A call it cannot run
// as the binary would (another build, a failpoint that must kill a process)
// it declines, and the plugin runs the call itself.
package plugind

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/telemetry"
)

// Runner runs one forwarded call (inproc.Exec.Serve).
type Runner interface {
	Serve(ctx context.Context, plugin, build string, stdin []byte, environ []string) (out []byte, declined string, err error)
}

// Observer counts served calls (the daemon's metrics); nil: logs only.
type Observer interface {
	// PluginCall is one call: path is "daemon" (run here), "declined" or
	// "error" (a bad request), result "ok" or "error".
	PluginCall(plugin, command, path, result string, d time.Duration)
}

// Server serves the plugin socket.
type Server struct {
	Socket   string
	Runner   Runner
	Log      *slog.Logger
	Observer Observer
	// DefaultTimeout is the deadline of a request that carries none.
	DefaultTimeout time.Duration
	// ReadTimeout bounds reading one request (the plugin writes it at once).
	ReadTimeout time.Duration
	// Drain bounds the wait for calls in flight when ctx ends.
	Drain time.Duration
	// AnswerMargin is kept from a request's timeout so the answer reaches
	// the plugin before it stops waiting.
	AnswerMargin time.Duration
	// Limiter is the daemon-wide limit on calls in flight, shared with the
	// meta socket (nil: the one in Serve's ctx, else none): a call past it
	// gets CNI error 11 and the plugin exits with it (the runtime retries).
	Limiter *sockserve.Limiter

	serving atomic.Bool
}

// Serving reports whether Serve is listening and accepting calls (for the
// daemon's health endpoints).
func (s *Server) Serving() bool { return s.serving.Load() }

// Defaults of the zero fields.
const (
	DefaultTimeout      = 2 * time.Minute
	DefaultReadTimeout  = 5 * time.Second
	DefaultDrain        = 30 * time.Second
	DefaultAnswerMargin = time.Second
)

func (s *Server) or(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// Serve listens on Socket until ctx ends, then waits (bounded) for the
// calls in flight.
func (s *Server) Serve(ctx context.Context) error {
	lis, err := sockserve.Listen(s.Socket)
	if err != nil {
		return err
	}
	srv := &sockserve.Server{Handle: s.serveConn, Drain: s.or(s.Drain, DefaultDrain),
		Limiter: s.Limiter, ReadTimeout: s.or(s.ReadTimeout, DefaultReadTimeout),
		OnPanic: func(r any) {
			s.Log.Error("plugin socket: connection panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}}
	s.serving.Store(true)
	drained, err := srv.Serve(ctx, lis)
	s.serving.Store(false)
	if !drained {
		s.Log.Warn("plugin socket: stopping with plugin calls still running", "waited", s.or(s.Drain, DefaultDrain))
	}
	return err
}

// serveConn answers one connection: read the request, run it, answer.
func (s *Server) serveConn(c net.Conn) {
	received := time.Now()
	var req daemonclient.PluginRequest
	err := daemonclient.Answer(c, s.or(s.ReadTimeout, DefaultReadTimeout), &req, func(readErr error) any {
		return s.handle(&req, readErr, received)
	})
	if err != nil {
		s.Log.Warn("plugin socket: the plugin left before the answer", "plugin", req.Plugin,
			"command", daemonclient.Getenv(req.Env, "CNI_COMMAND"), "container", daemonclient.Getenv(req.Env, "CNI_CONTAINERID"), "err", err)
	}
}

func (s *Server) handle(req *daemonclient.PluginRequest, readErr error, received time.Time) daemonclient.PluginResponse {
	if readErr != nil {
		// nothing was run: the plugin runs the call itself. An empty
		// request is the readiness probe (rdmanet-daemon --probe): not a call.
		if !strings.HasPrefix(readErr.Error(), "decode 0 bytes") {
			s.Log.Warn("plugin socket: bad request declined", "err", readErr)
			s.observe(req.Plugin, "", "error", "error", received)
		}
		return daemonclient.PluginResponse{Declined: "bad request: " + readErr.Error()}
	}
	cmd := daemonclient.Getenv(req.Env, "CNI_COMMAND")
	log := s.Log.With(append([]any{"plugin", req.Plugin, "command", cmd, "ifname", daemonclient.Getenv(req.Env, "CNI_IFNAME")},
		telemetry.CNICallAttrs(daemonclient.Getenv(req.Env, "CNI_CONTAINERID"), daemonclient.Getenv(req.Env, "CNI_ARGS"))...)...)
	if req.Version != daemonclient.PluginVersion {
		why := fmt.Sprintf("the daemon speaks plugin protocol v%d, the plugin sent v%d (install rdmanet's plugins and daemon of one release)", daemonclient.PluginVersion, req.Version)
		log.Warn("plugin call declined", "reason", why)
		s.observe(req.Plugin, cmd, "declined", "ok", received)
		return daemonclient.PluginResponse{Declined: why}
	}
	timeout := s.or(s.DefaultTimeout, DefaultTimeout)
	if req.TimeoutMs > 0 {
		timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	timeout = max(timeout-s.or(s.AnswerMargin, DefaultAnswerMargin), s.or(s.AnswerMargin, DefaultAnswerMargin))
	// The call runs to completion even if the plugin goes away (a half-done
	// ADD still rolls back), but not past its deadline.
	ctx, cancel := context.WithDeadline(context.Background(), received.Add(timeout))
	out, declined, err := s.safeServe(ctx, req)
	cancel()
	switch {
	case declined != "":
		log.Info("plugin call declined: the plugin runs it itself", "reason", declined)
		s.observe(req.Plugin, cmd, "declined", "ok", received)
		return daemonclient.PluginResponse{Declined: declined}
	case err != nil:
		te := asCNIError(err)
		log.Warn("plugin call served by the daemon: failed", "path", "daemon", "took", time.Since(received), "code", te.Code, "err", te.Msg)
		s.observe(req.Plugin, cmd, "daemon", "error", received)
		return daemonclient.PluginResponse{Error: te}
	}
	log.Info("plugin call served by the daemon", "path", "daemon", "took", time.Since(received))
	s.observe(req.Plugin, cmd, "daemon", "ok", received)
	return daemonclient.PluginResponse{Stdout: out}
}

// safeServe is Runner.Serve with a panic turned into this call's error.
func (s *Server) safeServe(ctx context.Context, req *daemonclient.PluginRequest) (out []byte, declined string, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.Log.Error("plugin call panicked", "plugin", req.Plugin, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			out, declined, err = nil, "", types.NewError(types.ErrInternal, fmt.Sprintf("%s (in the rdmanet daemon) panicked: %v", req.Plugin, r), "")
		}
	}()
	return s.Runner.Serve(ctx, req.Plugin, req.Build, req.Stdin, req.Env)
}

func (s *Server) observe(plugin, cmd, path, result string, received time.Time) {
	if s.Observer != nil {
		s.Observer.PluginCall(plugin, cmd, path, result, time.Since(received))
	}
}

func asCNIError(err error) *types.Error {
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}
