package plugind

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

type fakeRunner struct {
	out      []byte
	declined string
	err      error
	panic    bool
	deadline chan time.Duration
}

func (f *fakeRunner) Serve(ctx context.Context, plugin, build string, stdin []byte, environ []string) ([]byte, string, error) {
	if f.deadline != nil {
		d, _ := ctx.Deadline()
		f.deadline <- time.Until(d)
	}
	if f.panic {
		panic("boom")
	}
	return f.out, f.declined, f.err
}

type calls struct {
	mu    sync.Mutex
	paths []string
}

func (c *calls) PluginCall(plugin, command, path, result string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, plugin+" "+command+" "+path+" "+result)
}

func (c *calls) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...)
}

func serve(t *testing.T, r Runner, obs Observer) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "plugins.sock")
	s := &Server{Socket: sock, Runner: r, Log: slog.New(slog.DiscardHandler), Observer: obs, ReadTimeout: 2 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left after stop: %v", err)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not listen")
		}
	}
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", st.Mode(), err)
	}
	return sock
}

func roundTrip(t *testing.T, sock string, body []byte) daemonclient.PluginResponse {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.UnixConn).CloseWrite()
	var r daemonclient.PluginResponse
	if err := daemonclient.Read(c, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func request(v int) []byte {
	b, _ := json.Marshal(daemonclient.PluginRequest{Version: v, Plugin: "sriov", Env: []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1"}, Stdin: []byte("{}"), TimeoutMs: 10000})
	return b
}

func TestServer(t *testing.T) {
	tests := []struct {
		name     string
		runner   *fakeRunner
		body     []byte
		declined bool
		code     uint
		stdout   string
		observed string
	}{
		{name: "served", runner: &fakeRunner{out: []byte("result")}, body: request(daemonclient.PluginVersion), stdout: "result", observed: "sriov ADD daemon ok"},
		{name: "CNI error", runner: &fakeRunner{err: types.NewError(types.ErrInvalidNetworkConfig, "bad", "")}, body: request(daemonclient.PluginVersion), code: types.ErrInvalidNetworkConfig, observed: "sriov ADD daemon error"},
		{name: "plain error is internal", runner: &fakeRunner{err: errors.New("x")}, body: request(daemonclient.PluginVersion), code: types.ErrInternal, observed: "sriov ADD daemon error"},
		{name: "panic is this call's error", runner: &fakeRunner{panic: true}, body: request(daemonclient.PluginVersion), code: types.ErrInternal, observed: "sriov ADD daemon error"},
		{name: "declined by the runner", runner: &fakeRunner{declined: "other build"}, body: request(daemonclient.PluginVersion), declined: true, observed: "sriov ADD declined ok"},
		{name: "other protocol version declined", runner: &fakeRunner{out: []byte("never")}, body: request(daemonclient.PluginVersion + 1), declined: true, observed: "sriov ADD declined ok"},
		{name: "bad request declined", runner: &fakeRunner{out: []byte("never")}, body: []byte("{"), declined: true, observed: "  error error"},
		{name: "too large declined", runner: &fakeRunner{out: []byte("never")}, body: []byte(strings.Repeat(" ", daemonclient.MaxMessage+10)), declined: true, observed: "  error error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &calls{}
			sock := serve(t, tc.runner, obs)
			r := roundTrip(t, sock, tc.body)
			if (r.Declined != "") != tc.declined {
				t.Errorf("declined %q, want %v", r.Declined, tc.declined)
			}
			if tc.code != 0 && (r.Error == nil || r.Error.Code != tc.code) {
				t.Errorf("error %v, want code %d", r.Error, tc.code)
			}
			if tc.code == 0 && r.Error != nil {
				t.Errorf("unexpected error %v", r.Error)
			}
			if string(r.Stdout) != tc.stdout {
				t.Errorf("stdout %q, want %q", r.Stdout, tc.stdout)
			}
			if got := obs.get(); len(got) != 1 || got[0] != tc.observed {
				t.Errorf("observed %q, want [%q]", got, tc.observed)
			}
		})
	}
}

// TestServerDeadline: the call runs under the request's timeout less the
// answer margin.
func TestServerDeadline(t *testing.T) {
	f := &fakeRunner{out: []byte("x"), deadline: make(chan time.Duration, 1)}
	sock := serve(t, f, nil)
	_ = roundTrip(t, sock, request(daemonclient.PluginVersion)) // TimeoutMs 10s
	if d := <-f.deadline; d > 9*time.Second || d < 8*time.Second {
		t.Errorf("call deadline in %v, want about 9s (10s less the 1s margin)", d)
	}
}
