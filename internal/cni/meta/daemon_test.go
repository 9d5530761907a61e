package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/cni/meta/wire"
)

// call sends raw bytes to the daemon as the shim does (write, close the
// write side) and decodes the answer.
func call(t *testing.T, sock string, raw []byte) wire.Response {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	var r wire.Response
	if err := wire.Read(c, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDaemonProtocol(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	d := &Daemon{Socket: sock, Source: &StaticSource{Dir: dir, StatusDir: dir}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon socket did not come up")
		}
	}
	req := func(v int, conf string) []byte {
		b, err := json.Marshal(wire.Request{Version: v, Command: "STATUS", ContainerID: "c1", Config: json.RawMessage(conf)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name     string
		raw      []byte
		wantCode uint
		wantMsg  []string
	}{
		{name: "another release's shim", raw: req(0, `{}`), wantCode: 1, wantMsg: []string{"protocol v1", "sent v0", "one release"}},
		{name: "not JSON", raw: []byte("GET / HTTP/1.1\r\n\r\n"), wantCode: 6, wantMsg: []string{"bad request"}},
		{name: "larger than MaxMessage", raw: bytes.Repeat([]byte(" "), wire.MaxMessage+10), wantCode: 6, wantMsg: []string{"larger than"}},
		{name: "invalid network config is named", raw: req(wire.Version, `{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet"}`), wantCode: 7, wantMsg: []string{"clusterNetwork", "fix:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, sock, tc.raw)
			if r.Error == nil {
				t.Fatalf("no error; result %s", r.Result)
			}
			if r.Error.Code != tc.wantCode {
				t.Errorf("code %d, want %d (%s)", r.Error.Code, tc.wantCode, r.Error.Msg)
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(r.Error.Msg, w) {
					t.Errorf("message %q lacks %q", r.Error.Msg, w)
				}
			}
		})
	}
}
