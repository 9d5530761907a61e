package sockserve

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestListenModes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, sock string)
	}{
		{name: "dir created", setup: func(*testing.T, string) {}},
		{name: "stale socket replaced", setup: func(t *testing.T, sock string) {
			if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sock, nil, 0o666); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "run", "rdmanet", "d.sock")
			tc.setup(t, sock)
			lis, err := Listen(sock)
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			for p, want := range map[string]os.FileMode{sock: os.ModeSocket | 0o600, filepath.Dir(sock): os.ModeDir | 0o700} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != want {
					t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
				}
			}
		})
	}
}

// TestListenPlacesAndRemoves: the socket appears under its name only
// once it is 0600 (no temporary file is left), Close removes it, and a
// listener closing after another took the name leaves the newer socket.
func TestListenPlacesAndRemoves(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	first, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Addr().String(); got != sock {
		t.Errorf("Addr %q, want %q", got, sock)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "d.sock" {
		t.Fatalf("directory holds %v (%v), want only d.sock", entries, err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial the placed socket: %v", err)
	}
	c.Close()
	second, err := Listen(sock) // a new daemon replaces the socket
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("closing the replaced listener removed the new socket: %v", err)
	}
	c, err = net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	c.Close()
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket still there after Close: %v", err)
	}
}

// TestServeConnectionCap: with MaxConns handlers running, the next
// connection is not handled until one of them ends.
func TestServeConnectionCap(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	lis, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var running, peak atomic.Int32
	started := make(chan struct{}, 16)
	srv := &Server{MaxConns: 2, Drain: 5 * time.Second, Handle: func(c net.Conn) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { d, _ := srv.Serve(ctx, lis); done <- d }()
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		defer c.Close()
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("the first two connections were not handled")
		}
	}
	select {
	case <-started:
		t.Fatal("a third connection was handled beyond MaxConns=2")
	case <-time.After(300 * time.Millisecond):
	}
	release <- struct{}{} // one handler ends: the third is handled
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not handled after a slot freed")
	}
	close(release)
	cancel()
	if !<-done {
		t.Error("not drained")
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("peak handlers %d, want at most 2", p)
	}
}

// TestServeContainsPanics: a handler's panic is reported and the server goes on.
func TestServeContainsPanics(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	lis, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var panics atomic.Int32
	handled := make(chan struct{}, 2)
	srv := &Server{Drain: time.Second, OnPanic: func(any) { panics.Add(1) }, Handle: func(net.Conn) {
		handled <- struct{}{}
		panic("boom")
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = srv.Serve(ctx, lis) }()
	for range 2 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case <-handled:
		case <-time.After(5 * time.Second):
			t.Fatal("not handled")
		}
	}
	for deadline := time.Now().Add(5 * time.Second); panics.Load() < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if panics.Load() != 2 {
		t.Fatalf("panics reported %d, want 2", panics.Load())
	}
}
