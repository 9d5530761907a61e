package sockserve

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
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

// limitedServer serves sock with handle under limiter l: as the field
// when field, else through Serve's ctx (WithLimiter), as rdmanet-daemon
// passes it to the meta socket.
func limitedServer(t *testing.T, sock string, l *Limiter, field bool, handle func(net.Conn)) {
	t.Helper()
	lis, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handle: handle, Drain: 10 * time.Second, ReadTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	if field {
		srv.Limiter = l
	} else {
		ctx = WithLimiter(ctx, l)
	}
	done := make(chan bool, 1)
	go func() { d, _ := srv.Serve(ctx, lis); done <- d }()
	t.Cleanup(func() {
		cancel()
		if !<-done {
			t.Errorf("%s: not drained", sock)
		}
	})
}

// metaHandler answers shim requests: ADD of container "hold" waits for
// gate, of "boom" panics; each request's timeoutMs goes to seen.
func metaHandler(gate <-chan struct{}, seen chan<- daemonclient.Request) func(net.Conn) {
	return func(c net.Conn) {
		var req daemonclient.Request
		_ = daemonclient.Answer(c, 5*time.Second, &req, func(readErr error) any {
			if readErr != nil {
				return daemonclient.Response{Error: types.NewError(types.ErrDecodingFailure, readErr.Error(), "")}
			}
			if seen != nil {
				seen <- req
			}
			switch req.ContainerID {
			case "hold":
				<-gate
			case "boom":
				panic("boom")
			}
			return daemonclient.Response{Result: []byte(`{"cniVersion":"1.0.0"}`)}
		})
	}
}

func metaCall(t *testing.T, sock, cmd, id string, timeoutMs int64) (daemonclient.Response, error) {
	t.Helper()
	var resp daemonclient.Response
	err := daemonclient.Exchange(sock, time.Second, time.Minute, daemonclient.Request{Version: daemonclient.Version, Command: cmd, ContainerID: id, TimeoutMs: timeoutMs}, &resp)
	return resp, err
}

func waitStats(t *testing.T, l *Limiter, what string, ok func(Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(l.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("limiter never reached %s: %+v", what, l.Stats())
		}
	}
}

// TestServeLimitedPanicFreesSlot: a handler that panics gives its slot
// back; the next call runs.
func TestServeLimitedPanicFreesSlot(t *testing.T) {
	l, err := NewLimiter(Limits{MaxInFlight: 1, MaxQueued: 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "d.sock")
	limitedServer(t, sock, l, true, metaHandler(nil, nil))
	for i := range 3 {
		if _, err := metaCall(t, sock, "ADD", "boom", 0); err == nil {
			t.Fatalf("call %d: a panicking handler answered", i)
		}
		resp, err := metaCall(t, sock, "ADD", fmt.Sprintf("ok%d", i), 0)
		if err != nil || resp.Error != nil {
			t.Fatalf("call %d after a panic: %v %+v, want it run (the slot given back)", i, err, resp.Error)
		}
	}
	if s := l.Stats(); s.InFlight["add"] != 0 || s.Queued["add"] != 0 {
		t.Errorf("slots after the calls: %+v, want none held", s)
	}
}

// TestServeLimitAcrossSockets: one limiter over the meta socket (through
// ctx) and the plugin socket (its field): the meta call's ADD slot is the
// only one, so another container's plugin ADD is refused with code 11
// while its own delegate's plugin call and a DEL run.
func TestServeLimitAcrossSockets(t *testing.T) {
	l, err := NewLimiter(Limits{MaxInFlight: 2, DelReserve: 1, MaxQueued: 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	metaSock, pluginSock := filepath.Join(dir, "meta.sock"), filepath.Join(dir, "plugins.sock")
	gate := make(chan struct{})
	limitedServer(t, metaSock, l, false, metaHandler(gate, nil))
	limitedServer(t, pluginSock, l, true, func(c net.Conn) {
		var req daemonclient.PluginRequest
		_ = daemonclient.Answer(c, 5*time.Second, &req, func(error) any { return daemonclient.PluginResponse{Stdout: []byte("ok")} })
	})
	held := make(chan error, 1)
	go func() {
		resp, err := metaCall(t, metaSock, "ADD", "hold", 0)
		if err == nil && resp.Error != nil {
			err = resp.Error
		}
		held <- err
	}()
	waitStats(t, l, "the meta ADD holding its slot", func(s Stats) bool { return s.InFlight["add"] == 1 })
	plugin := func(cmd, id string) daemonclient.PluginResponse {
		t.Helper()
		var resp daemonclient.PluginResponse
		req := daemonclient.PluginRequest{Version: daemonclient.PluginVersion, Plugin: "sriov", Env: []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=" + id}, TimeoutMs: 60000}
		if err := daemonclient.Exchange(pluginSock, time.Second, time.Minute, req, &resp); err != nil {
			t.Fatalf("plugin %s %s: %v", cmd, id, err)
		}
		return resp
	}
	if r := plugin("ADD", "hold"); r.Error != nil || string(r.Stdout) != "ok" {
		t.Errorf("the held container's delegate call: %+v, want it run", r)
	}
	r := plugin("ADD", "other")
	if r.Error == nil || r.Error.Code != types.ErrTryAgainLater || !strings.Contains(r.Error.Msg, "--"+FlagMaxInFlight) {
		t.Errorf("another container's ADD: %+v, want CNI error 11 naming --%s", r, FlagMaxInFlight)
	}
	if r := plugin("DEL", "gone"); r.Error != nil {
		t.Errorf("DEL while the ADD slot is held: %+v, want it run from the reserve", r)
	}
	close(gate)
	if err := <-held; err != nil {
		t.Errorf("the held meta ADD: %v", err)
	}
	waitStats(t, l, "no slot held", func(s Stats) bool { return s.InFlight["add"] == 0 && s.InFlight["del"] == 0 })
}

// TestServeWaitShortensTimeout: a call that waited for a slot reaches its
// handler with the wait its client has left.
func TestServeWaitShortensTimeout(t *testing.T) {
	l, err := NewLimiter(Limits{MaxInFlight: 1, MaxQueued: 1, MaxWait: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "d.sock")
	gate := make(chan struct{})
	seen := make(chan daemonclient.Request, 2)
	limitedServer(t, sock, l, true, metaHandler(gate, seen))
	first := make(chan error, 1)
	go func() { _, err := metaCall(t, sock, "ADD", "hold", 0); first <- err }()
	if r := <-seen; r.ContainerID != "hold" {
		t.Fatalf("first call seen as %+v", r)
	}
	second := make(chan error, 1)
	go func() { _, err := metaCall(t, sock, "ADD", "next", 60000); second <- err }()
	waitStats(t, l, "the second call waiting", func(s Stats) bool { return s.Queued["add"] == 1 })
	time.Sleep(5 * time.Millisecond) // it has waited at least this long
	close(gate)
	r := <-seen
	if r.ContainerID != "next" || r.TimeoutMs <= 0 || r.TimeoutMs > 60000-5 {
		t.Errorf("the waited call reached its handler with timeoutMs %d (%+v), want 60000 less its wait", r.TimeoutMs, r)
	}
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Error(err)
		}
	}
}
