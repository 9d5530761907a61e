package plugind

import (
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

// FuzzServeConn sends any bytes to the plugin socket's connection handler
// (with a runner that does nothing): every request gets exactly one answer
// that decodes as a PluginResponse, and a request that is not a whole valid
// message of this protocol version is declined, never run.
func FuzzServeConn(f *testing.F) {
	for _, r := range []daemonclient.PluginRequest{
		{Version: daemonclient.PluginVersion, Plugin: "sriov", Build: "b", Env: []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=net1", "CNI_ARGS=K8S_POD_NAME=p"},
			Stdin: []byte(`{"cniVersion":"1.0.0","name":"n","type":"sriov"}`), TimeoutMs: 1000},
		{Version: daemonclient.PluginVersion + 1, Plugin: "rdma"},
		{Version: daemonclient.PluginVersion, Plugin: "rdmanet-ipam", Env: []string{"CNI_COMMAND", "=", "CNI_CONTAINERID=../../x"}, TimeoutMs: -5},
	} {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	for _, s := range []string{"", "{", `{"v":1,"timeoutMs":9223372036854775807}`, `{"v":1,"env":[1]}`, `{"v":1,"stdin":"@@"}`} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte) {
		runner := &fakeRunner{out: []byte("ran")}
		s := &Server{Runner: runner, Log: slog.New(slog.DiscardHandler), ReadTimeout: 2 * time.Second}
		lis, err := net.Listen("unix", filepath.Join(dir, "p.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		go func() {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			s.serveConn(c)
		}()
		c, err := net.Dial("unix", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(body); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.UnixConn).CloseWrite()
		var resp daemonclient.PluginResponse
		if err := daemonclient.Read(c, &resp); err != nil {
			t.Fatalf("no answer that decodes: %v", err)
		}
		var req daemonclient.PluginRequest
		valid := json.Unmarshal(body, &req) == nil && req.Version == daemonclient.PluginVersion
		if !valid && resp.Declined == "" {
			t.Fatalf("request %q was not declined: %+v", body, resp)
		}
		if valid && resp.Declined == "" && string(resp.Stdout) != "ran" {
			t.Fatalf("valid request %q: %+v", body, resp)
		}
	})
}
