// Package sockserve is the unix-socket server loop of rdmanet-daemon's two
// sockets (the meta shim's and the plugins'): a root-only socket, one
// goroutine per connection with its panics contained, and a bounded drain
// of the connections in flight when the daemon stops.
package sockserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Listen listens on the unix socket at path, replacing a stale socket file
// (a daemon that died leaves one), with the socket mode 0600 and its
// directory created 0700 when missing: only root talks to the daemon.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory of %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return lis, nil
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
	// MaxConns bounds the connections served at once (0: DefaultMaxConns).
	// Beyond it the server stops accepting: clients wait in the socket's
	// backlog, within their own deadlines, until a connection ends.
	MaxConns int
}

// DefaultMaxConns is far above a node's concurrent CNI calls (kubelet
// starts a few pods at once; a storm of 200 pods stays below it) and bounds
// the goroutines and file descriptors a runaway client can take.
const DefaultMaxConns = 1024

// Serve accepts on lis until ctx ends (it then closes lis and removes the
// socket file), then waits up to Drain for the connections in flight. It
// returns false in drained when connections were still running at the end.
func (s *Server) Serve(ctx context.Context, lis net.Listener) (drained bool, err error) {
	go func() {
		<-ctx.Done()
		lis.Close()
	}()
	var inflight sync.WaitGroup
	maxConns := s.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
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
			s.Handle(c)
		}()
	}
	if ua, ok := lis.Addr().(*net.UnixAddr); ok {
		_ = os.Remove(ua.Name)
	}
	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
		return true, err
	case <-time.After(s.Drain):
		return false, err
	}
}
