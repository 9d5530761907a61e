// Package sockserve is the unix-socket server loop of rdmanet-daemon's two
// sockets (the meta shim's and the plugins'): a root-only socket, one
// goroutine per connection with its panics contained, the daemon-wide
// limit on CNI calls in flight (Limiter), and a bounded drain of the
// connections in flight when the daemon stops.
package sockserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

// Listen listens on the unix socket at path, replacing a stale socket file
// (a daemon that died leaves one), with the socket mode 0600 and its
// directory created 0700 when missing: only root talks to the daemon.
//
// The socket is bound under a temporary name in the same directory,
// chmodded, then renamed to path, so path never names a socket with the
// umask's mode (the directory is a 0755 hostPath on a node). Closing the
// listener removes path while it is still this listener's socket.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("socket directory of %s: %w", path, err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.tmp", filepath.Base(path), os.Getpid()))
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove leftover socket %s: %w", tmp, err)
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	lis.SetUnlinkOnClose(false) // the name it was bound to is renamed away
	placed := false
	defer func() {
		if !placed {
			lis.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o600); err != nil {
		return nil, fmt.Errorf("chmod %s: %w", tmp, err)
	}
	// rename replaces a stale socket file at path atomically
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("put socket %s in place: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	placed = true
	return &listener{UnixListener: lis, path: path, file: fi}, nil
}

// listener is a unix listener whose socket file was renamed to path.
type listener struct {
	*net.UnixListener
	path string
	file os.FileInfo // the socket file, to remove only our own on Close
}

// Addr is the socket's final path (not the temporary name it was bound to).
func (l *listener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close stops listening and removes the socket file unless another
// listener has replaced it meanwhile.
func (l *listener) Close() error {
	err := l.UnixListener.Close()
	if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.file) {
		_ = os.Remove(l.path)
	}
	return err
}

// Server runs Handle for every connection accepted on a listener.
type Server struct {
	// Handle serves one connection; the server closes it afterwards.
	Handle func(net.Conn)
	// OnPanic is told about a panic of Handle (the connection is closed,
	// the server goes on).
	OnPanic func(value any)
	// Drain bounds the wait for connections in flight once ctx ends.
	Drain time.Duration
	// MaxConns bounds the connections served at once (0: DefaultMaxConns,
	// or with a Limiter enough for its calls in flight and waiting, and as
	// many again to refuse). Beyond it the server stops accepting: clients
	// wait in the socket's backlog, within their own deadlines, until a
	// connection ends.
	MaxConns int
	// Limiter, when set, admits each call (a daemonclient request of
	// either socket) before Handle runs it: the request is read first
	// (within ReadTimeout), a refused call is answered with the Limiter's
	// CNI error (code 11) without Handle, and Handle reads the request as
	// sent (its timeoutMs less the time it waited). nil: the Limiter of
	// Serve's ctx (WithLimiter), else every call runs at once.
	Limiter *Limiter
	// ReadTimeout bounds reading a request before admission (0:
	// DefaultReadTimeout).
	ReadTimeout time.Duration
}

// DefaultReadTimeout bounds reading one request: clients write it at once.
const DefaultReadTimeout = 5 * time.Second

// DefaultMaxConns is far above a node's concurrent CNI calls (kubelet
// starts a few pods at once; a storm of 200 pods stays below it) and bounds
// the goroutines and file descriptors a runaway client can take.
const DefaultMaxConns = 1024

// Serve accepts on lis until ctx ends (it then closes lis, which removes
// a Listen socket's file), then waits up to Drain for the connections in
// flight. It returns false in drained when connections were still running
// at the end.
func (s *Server) Serve(ctx context.Context, lis net.Listener) (drained bool, err error) {
	go func() {
		<-ctx.Done()
		lis.Close()
	}()
	var inflight sync.WaitGroup
	lim := s.Limiter
	if lim == nil {
		lim = LimiterFrom(ctx)
	}
	if lim != nil && lim.lim.MaxInFlight <= 0 {
		lim = nil // no limit: nothing to read ahead
	}
	maxConns := s.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
		if lim != nil {
			// every admitted and waiting call, and as many to refuse at once
			maxConns = max(maxConns, 2*(lim.lim.MaxInFlight+lim.lim.MaxQueued))
		}
	}
	slots := make(chan struct{}, maxConns)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		c, aerr := lis.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("accept on %s: %w", lis.Addr(), aerr)
			}
			break
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer func() { <-slots }()
			defer c.Close()
			defer func() {
				if r := recover(); r != nil && s.OnPanic != nil {
					s.OnPanic(r)
				}
			}()
			if lim == nil {
				s.Handle(c)
				return
			}
			conn, release, ok := s.admit(ctx, lim, c)
			if !ok {
				return
			}
			defer release() // also when Handle panics
			s.Handle(conn)
		}()
	}
	// Accept may fail before the closing goroutine's Close has removed the
	// socket file; closing again here (a no-op for the listener) makes the
	// file gone when Serve returns.
	_ = lis.Close()
	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
		return true, err
	case <-time.After(s.Drain):
		return false, err
	}
}

// admit reads c's request and takes a slot for its call from lim. It
// returns the connection Handle reads the request from, and the slot's
// release; false when the call was refused (and answered).
func (s *Server) admit(ctx context.Context, lim *Limiter, c net.Conn) (net.Conn, func(), bool) {
	rt := s.ReadTimeout
	if rt <= 0 {
		rt = DefaultReadTimeout
	}
	_ = c.SetReadDeadline(time.Now().Add(rt))
	body, rerr := io.ReadAll(io.LimitReader(c, daemonclient.MaxMessage+1))
	_ = c.SetReadDeadline(time.Time{})
	rc := &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(body), c)}
	p, isCall := daemonclient.PeekRequest(body)
	if rerr != nil || len(body) > daemonclient.MaxMessage || !isCall {
		return rc, func() {}, true // no call: Handle answers what it reads
	}
	call := Call{Command: p.Command, ContainerID: p.ContainerID, Timeout: time.Duration(p.TimeoutMs) * time.Millisecond}
	release, waited, err := lim.Admit(ctx, call)
	if err != nil {
		e := types.NewError(types.ErrTryAgainLater, err.Error(), "")
		if rej := (*RejectedError)(nil); errors.As(err, &rej) {
			e = rej.CNI
		}
		_ = c.SetWriteDeadline(time.Now().Add(rt))
		_, _ = c.Write(daemonclient.ErrorResponse(e))
		return nil, nil, false
	}
	if waited > 0 && p.TimeoutMs > 0 {
		if b, err := daemonclient.WithTimeoutMs(body, max(p.TimeoutMs-waited.Milliseconds(), 1)); err == nil {
			rc.r = io.MultiReader(bytes.NewReader(b), c)
		}
	}
	return rc, release, true
}

// replayConn is a connection whose request was read ahead: reads give it
// again, then what the connection has after it (EOF: clients close their
// write side after the request).
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }
