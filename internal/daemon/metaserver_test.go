package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
	"github.com/rdmanet/rdmanet/test/syncbuf"
)

// testPluginPkg is the configurable test delegate (failing DEL, slow ADD).
const testPluginPkg = "github.com/rdmanet/rdmanet/internal/cni/meta/testplugin"

// call sends raw bytes to the daemon as the shim does (write, close the
// write side) and decodes the answer.
func call(t *testing.T, sock string, raw []byte) daemonclient.Response {
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
	var r daemonclient.Response
	if err := daemonclient.Read(c, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDaemonProtocol(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	d := &MetaServer{Socket: sock, Source: &meta.StaticSource{Dir: dir, StatusDir: dir}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
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
		b, err := json.Marshal(daemonclient.Request{Version: v, Command: "STATUS", ContainerID: "c1", Config: json.RawMessage(conf)})
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
		{name: "larger than MaxMessage", raw: bytes.Repeat([]byte(" "), daemonclient.MaxMessage+10), wantCode: 6, wantMsg: []string{"larger than"}},
		{name: "invalid network config is named", raw: req(daemonclient.Version, `{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet"}`), wantCode: 7, wantMsg: []string{"clusterNetwork", "fix:"}},
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

// startDaemon serves d on a socket in dir until the test ends.
func startDaemon(t *testing.T, d *MetaServer) string {
	t.Helper()
	if d.Socket == "" {
		d.Socket = filepath.Join(t.TempDir(), "d.sock")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
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
		if c, err := net.Dial("unix", d.Socket); err == nil {
			c.Close()
			return d.Socket
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon socket did not come up")
		}
	}
}

// panicExec is a delegate runner that panics: on the calling goroutine, or
// inside a network-namespace callback (which ns.Do runs on a goroutine of
// its own), the way an in-process plugin's bug would.
type panicExec struct{ inNetns bool }

func (e panicExec) ExecPlugin(context.Context, string, []byte, []string) ([]byte, error) {
	if e.inNetns {
		n, err := nsguard.GetCurrentNS()
		if err != nil {
			return nil, err
		}
		defer n.Close()
		return nil, n.Do(func(ns.NetNS) error { panic("boom in a netns callback") })
	}
	panic("boom")
}

func (panicExec) FindInPath(plugin string, _ []string) (string, error) { return "/opt/" + plugin, nil }
func (panicExec) Decode([]byte) (version.PluginInfo, error)            { return version.All, nil }

// TestDaemonRecoversPanics: a panic while serving one call — also one
// inside a netns callback on its own goroutine — is that call's CNI error
// (code 999, the stack in the log), and the daemon serves the next call
// (defect 12).
func TestDaemonRecoversPanics(t *testing.T) {
	netnsutil.RequireRoot(t) // entering a network namespace
	dir := t.TempDir()
	def := filepath.Join(dir, "default.conflist")
	if err := os.WriteFile(def, []byte(`{"cniVersion":"1.0.0","name":"cluster","plugins":[{"type":"buggy"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := `{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","clusterNetwork":"` + def + `","cniDir":"` + filepath.Join(dir, "cni") + `","source":{"type":"static","dir":"` + dir + `"}}`
	tests := []struct {
		name    string
		inNetns bool
		want    string
	}{
		{name: "panic on the call's goroutine", want: "boom"},
		{name: "panic inside a netns callback", inNetns: true, want: "boom in a netns callback"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf syncbuf.Buffer
			sock := startDaemon(t, &MetaServer{Source: &meta.StaticSource{Dir: dir, StatusDir: dir}, Exec: panicExec{inNetns: tc.inNetns},
				Log: slog.New(slog.NewTextHandler(&logBuf, nil))})
			for i := 0; i < 2; i++ { // the daemon is still there for the second call
				b, err := json.Marshal(daemonclient.Request{Version: daemonclient.Version, Command: "ADD", ContainerID: fmt.Sprintf("c%d", i), Netns: "/proc/self/ns/net", IfName: "eth0",
					Path: "/opt", Config: json.RawMessage(conf)})
				if err != nil {
					t.Fatal(err)
				}
				r := call(t, sock, b)
				if r.Error == nil || r.Error.Code != types.ErrInternal || !strings.Contains(r.Error.Msg, "panic: "+tc.want) || !strings.Contains(r.Error.Msg, fmt.Sprintf("container c%d", i)) {
					t.Fatalf("call %d: answer %+v, want code 999 naming the panic %q and the container", i, r.Error, tc.want)
				}
			}
			if log := logBuf.String(); !strings.Contains(log, "panic recovered") || !strings.Contains(log, "panicExec") {
				t.Fatalf("the log lacks the panic and its stack:\n%s", log)
			}
		})
	}
}

// TestDaemonRequestDeadline: a call runs under the deadline the shim sends
// (or, without one, the config's addTimeout): a delegate process still
// running then is killed and the ADD fails, instead of the call running
// with no limit (defect 12).
func TestDaemonRequestDeadline(t *testing.T) {
	netnsutil.RequireRoot(t)
	bin, err := pluginbin.TempDir("rdmanet-meta-deadline-", testPluginPkg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	pod := netnsutil.NewNS(t)
	tests := []struct {
		name       string
		timeoutMs  int64
		addTimeout string
	}{
		{name: "deadline sent by the shim", timeoutMs: 2000},
		{name: "config's addTimeout when the request has none", addTimeout: "1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			def := filepath.Join(dir, "default.conflist")
			if err := os.WriteFile(def, []byte(`{"cniVersion":"1.0.0","name":"cluster","plugins":[{"type":"testplugin","sleepAdd":"60s","pidFile":"`+pidFile+`"}]}`), 0o644); err != nil {
				t.Fatal(err)
			}
			conf := map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet", "clusterNetwork": def, "cniDir": filepath.Join(dir, "cni"), "binDir": bin,
				"source": map[string]any{"type": "static", "dir": dir}}
			if tc.addTimeout != "" {
				conf["addTimeout"] = tc.addTimeout
			}
			cb, _ := json.Marshal(conf)
			sock := startDaemon(t, &MetaServer{Source: &meta.StaticSource{Dir: dir, StatusDir: dir}})
			b, err := json.Marshal(daemonclient.Request{Version: daemonclient.Version, Command: "ADD", ContainerID: "c1", Netns: pod.Path(), IfName: "eth0", Path: bin, Config: cb, TimeoutMs: tc.timeoutMs})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := call(t, sock, b)
			took := time.Since(start)
			if r.Error == nil {
				t.Fatalf("ADD succeeded: %s", r.Result)
			}
			if took > 8*time.Second {
				t.Fatalf("ADD took %s: the deadline did not stop it (%s)", took, r.Error.Msg)
			}
			pb, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("the delegate never ran: %v (%s)", err, r.Error.Msg)
			}
			pid, _ := strconv.Atoi(string(pb))
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("delegate process %d still exists after the deadline (kill 0: %v)", pid, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "cni", "cache", "c1.json")); !os.IsNotExist(err) {
				t.Fatalf("the timed-out ADD left its cache (%v)", err)
			}
			t.Logf("ADD failed after %s: %s", took.Round(time.Millisecond), r.Error.Msg)
		})
	}
}

// recordedEvents is an EventRecorder that keeps what it is given.
type recordedEvents struct {
	mu   sync.Mutex
	pods []meta.PodIdentity
	msgs []string
}

func (r *recordedEvents) AttachFailed(pod meta.PodIdentity, containerID string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = append(r.pods, pod)
	r.msgs = append(r.msgs, containerID+": "+err.Error())
}

// TestDaemonRecordsFailedAttach: a failed ADD reaches the Events recorder
// with the pod of CNI_ARGS and the CNI error's text; a DEL never does.
func TestDaemonRecordsFailedAttach(t *testing.T) {
	dir := t.TempDir()
	writePodManifest(t, dir, "p0", "uid-0")
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","clusterNetwork":"absent-net",
		"cniDir":%q,"source":{"type":"static","dir":%q}}`, t.TempDir(), dir)
	ev := &recordedEvents{}
	d := &MetaServer{Source: &meta.StaticSource{Dir: dir, StatusDir: t.TempDir()}, Events: ev, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	args := "K8S_POD_NAMESPACE=ai;K8S_POD_NAME=p0;K8S_POD_UID=uid-0;K8S_POD_INFRA_CONTAINER_ID=c0ffee0123456789"
	req := daemonclient.Request{Version: daemonclient.Version, Command: "ADD", ContainerID: "c0ffee0123456789", Netns: "/proc/self/ns/net",
		IfName: "eth0", Args: args, Config: json.RawMessage(conf)}
	_, err := d.Call(context.Background(), req)
	if err == nil {
		t.Fatal("ADD with an absent clusterNetwork succeeded")
	}
	del := req
	del.Command = "DEL"
	_, _ = d.Call(context.Background(), del)
	if len(ev.pods) != 1 {
		t.Fatalf("recorded %d events (%v), want 1 for the failed ADD", len(ev.pods), ev.msgs)
	}
	if want := (meta.PodIdentity{Namespace: "ai", Name: "p0", UID: "uid-0"}); ev.pods[0] != want {
		t.Errorf("event on %+v, want %+v", ev.pods[0], want)
	}
	for _, w := range []string{"c0ffee012345", "absent-net", err.Error()} {
		if !strings.Contains(ev.msgs[0], w) {
			t.Errorf("event message %q lacks %q", ev.msgs[0], w)
		}
	}
}

// TestCallRefusesEscapingNames: values of the runtime that would put a file
// outside the plugin's directories are refused over the daemon socket (where
// skel's checks do not run) before anything is created or read; the error
// names the field, the value and the rule.
func TestCallRefusesEscapingNames(t *testing.T) {
	root := t.TempDir()
	cniDir := filepath.Join(root, "a", "b", "cni")
	manifests := filepath.Join(root, "manifests")
	if err := os.MkdirAll(manifests, 0o700); err != nil {
		t.Fatal(err)
	}
	conf, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet", "clusterNetwork": "k8s-pod-network",
		"confDir": filepath.Join(root, "conf"), "cniDir": cniDir, "binDir": filepath.Join(root, "bin"),
		"source": map[string]any{"type": "static", "dir": manifests}})
	sock := startDaemon(t, &MetaServer{Socket: filepath.Join(root, "run", "d.sock"), Source: &meta.StaticSource{Dir: manifests, StatusDir: filepath.Join(cniDir, "status")},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	before := tree(t, root)

	podArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=trainer-0"
	tests := []struct {
		name    string
		req     daemonclient.Request
		wantMsg []string
	}{
		{name: "ADD container id ../../etc/x", req: daemonclient.Request{Command: "ADD", ContainerID: "../../etc/x", IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", `"../../etc/x"`, "letters, digits"}},
		{name: "ADD absolute container id", req: daemonclient.Request{Command: "ADD", ContainerID: "/etc/passwd", IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", `"/etc/passwd"`}},
		{name: "ADD container id with NUL", req: daemonclient.Request{Command: "ADD", ContainerID: "c1\x00x", IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", "NUL"}},
		{name: "ADD over-long container id", req: daemonclient.Request{Command: "ADD", ContainerID: strings.Repeat("c", 4096), IfName: "eth0", Args: podArgs},
			wantMsg: []string{"CNI_CONTAINERID", "4096 bytes"}},
		{name: "ADD ifName ../x", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", IfName: "../x", Args: podArgs},
			wantMsg: []string{"CNI_IFNAME", `"../x"`}},
		{name: "ADD ifName empty", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", Args: podArgs},
			wantMsg: []string{"CNI_IFNAME", "empty"}},
		{name: "ADD pod name escaping", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", IfName: "eth0", Args: "K8S_POD_NAMESPACE=ai-training;K8S_POD_NAME=../../../x"},
			wantMsg: []string{"K8S_POD_NAME", `"../../../x"`, "DNS-1123"}},
		{name: "ADD pod namespace escaping", req: daemonclient.Request{Command: "ADD", ContainerID: "c1", IfName: "eth0", Args: "K8S_POD_NAMESPACE=..;K8S_POD_NAME=x"},
			wantMsg: []string{"K8S_POD_NAMESPACE", `".."`}},
		{name: "DEL container id ../../etc/x", req: daemonclient.Request{Command: "DEL", ContainerID: "../../etc/x", IfName: "eth0"},
			wantMsg: []string{"CNI_CONTAINERID", `"../../etc/x"`}},
		{name: "DEL container id ..", req: daemonclient.Request{Command: "DEL", ContainerID: "..", IfName: "eth0"},
			wantMsg: []string{"CNI_CONTAINERID", `".."`}},
		{name: "CHECK container id ../x", req: daemonclient.Request{Command: "CHECK", ContainerID: "../x", IfName: "eth0"},
			wantMsg: []string{"CNI_CONTAINERID", `"../x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Version, tc.req.Config = daemonclient.Version, conf
			var r daemonclient.Response
			if err := daemonclient.Exchange(sock, 2*time.Second, 10*time.Second, tc.req, &r); err != nil {
				t.Fatal(err)
			}
			if r.Error == nil {
				t.Fatalf("accepted; result %s", r.Result)
			}
			if r.Error.Code != types.ErrInvalidEnvironmentVariables {
				t.Errorf("code %d, want %d (%s)", r.Error.Code, types.ErrInvalidEnvironmentVariables, r.Error.Msg)
			}
			for _, w := range append(tc.wantMsg, "fix:", tc.req.Command) {
				if !strings.Contains(r.Error.Msg, w) {
					t.Errorf("message %q lacks %q", r.Error.Msg, w)
				}
			}
			if after := tree(t, root); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("the refused call changed the tree:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// writePodManifest writes pod ai/name with uid as the static source reads it.
func writePodManifest(t *testing.T, dir, name, uid string) {
	t.Helper()
	y := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: ai\n  uid: %s\nspec:\n  containers:\n  - name: c\n    image: busybox\n", name, uid)
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree lists every path under root with its mode.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel+" "+fi.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
