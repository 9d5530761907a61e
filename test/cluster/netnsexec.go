package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// netnsHandle is an open network namespace the supervisor starts processes
// in and dials from. Only the calling OS thread switches namespace, and only
// for the duration of one call.
type netnsHandle struct{ f *os.File }

func openNetns(path string) (*netnsHandle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	return &netnsHandle{f: f}, nil
}

// do runs fn on an OS thread that is in the namespace. When switching back
// fails the thread is left locked, so the runtime retires it instead of
// reusing a thread in the wrong namespace.
func (n *netnsHandle) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %s: %w", n.f.Name(), err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("return from network namespace %s: %w (thread retired)", n.f.Name(), err)
			return // thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// start starts cmd in the namespace: the child is forked from a thread that
// is in it, and a child inherits its creating thread's namespaces.
func (n *netnsHandle) start(cmd *exec.Cmd) error {
	return n.do(cmd.Start)
}

// dial opens a TCP connection whose socket lives in the namespace.
func (n *netnsHandle) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
