package meta_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/daemon"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// testPluginImport is the configurable test delegate (failing DEL, slow ADD).
const testPluginImport = "github.com/rdmanet/rdmanet/internal/cni/meta/testplugin"

// flakyChain is a NAD config: macvlan (host-local) chained with the test
// plugin, whose DEL fails while marker exists. The chain's DEL stops at the
// test plugin, so while it fails, macvlan's link and address stay — the
// stand-in for a VF that its sriov plugin keeps until its DEL succeeds.
func flakyChain(r *rig, name, subnet, marker string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"%s","plugins":[{"type":"macvlan","master":"roce0","mode":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"%s"}]],"dataDir":"%s"}},{"type":"testplugin","failDelWhile":"%s"}]}`,
		name, subnet, filepath.Join(r.dir, "ipam"), marker)
}

func (r *rig) record(container string) (*meta.Record, bool) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "cni", "cache", container+".json"))
	if os.IsNotExist(err) {
		return nil, false
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var rec meta.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		r.t.Fatal(err)
	}
	return &rec, true
}

func (r *rig) log() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "rdmanet.log"))
	return string(b)
}

// startDaemon runs rdmanet-daemon on the rig's config in the host
// namespace, with fast DEL retries and metrics on a free port; it returns
// the metrics URL.
func (r *rig) startDaemon() string {
	r.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	netnsutil.SetUp(r.t, r.host, "lo")
	sock := filepath.Join(r.dir, "daemon.sock")
	r.conf["daemonSocket"] = sock
	b, err := json.Marshal(r.conf)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write("rdmanet.conf", string(b))
	logPath := filepath.Join(r.dir, "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(r.bin, "rdmanet-daemon"), "--config", filepath.Join(r.dir, "rdmanet.conf"), "--log-level", "debug",
		"--del-retry-interval", "100ms", "--del-retry-backoff", "100ms", "--metrics-addr", addr,
		"--plugin-socket", filepath.Join(r.dir, "plugins.sock"))
	cmd.Stdout, cmd.Stderr = logf, logf
	netnsutil.Do(r.t, r.host, cmd.Start) // metrics listen in the host namespace, like the socket
	r.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		logf.Close()
		if r.t.Failed() {
			b, _ := os.ReadFile(logPath)
			r.t.Logf("daemon log:\n%s", b)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			r.t.Fatalf("daemon did not come up:\n%s", b)
		}
	}
	return "http://" + addr + "/metrics"
}

// scrape reads the metrics page from inside the host namespace (the
// connection is made on the namespace's thread; reading it may happen
// anywhere).
func (r *rig) scrape(url string) string {
	r.t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics")
	var c net.Conn
	netnsutil.Do(r.t, r.host, func() error {
		var err error
		c, err = net.DialTimeout("tcp", host, 5*time.Second)
		return err
	})
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Close = true
	if err := req.Write(c); err != nil {
		r.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(body)
}

// TestDelFailureIsKeptAndRetried: a delegate whose DEL fails is not
// forgotten: DEL reports success to the runtime only once the record of
// what is left is on disk, keeps the failed delegate (and nothing else)
// pending, and the retry — by the next DEL, by CNI GC, or by the daemon
// with backoff — removes it and releases its resources (defect 1).
func TestDelFailureIsKeptAndRetried(t *testing.T) {
	tests := []struct {
		name  string
		retry func(r *rig) // after the marker is gone; must release everything
	}{
		{name: "next DEL of the container", retry: func(r *rig) {
			if err := r.del("1.1.0", "c1", "ai-training", "trainer-0"); err != nil {
				r.t.Fatal(err)
			}
		}},
		{name: "CNI GC", retry: func(r *rig) {
			err := r.host.Do(func(ns.NetNS) error {
				return r.cni.GCNetworkList(context.Background(), r.metaList("1.1.0"), &libcni.GCArgs{ValidAttachments: []types.GCAttachment{}})
			})
			if err != nil {
				r.t.Fatal(err)
			}
		}},
		{name: "daemon retry with backoff"}, // nil: the daemon does it on its own
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			metrics := ""
			if tc.retry == nil {
				metrics = r.startDaemon()
			}
			marker := filepath.Join(r.dir, "fail-del")
			r.nad("ai-training", "flaky", "", flakyChain(r, "flaky", "10.60.2.0/24", marker))
			r.podManifest("ai-training", "trainer-0", "flaky", "")
			if _, err := r.add("1.1.0", "c1", "ai-training", "trainer-0"); err != nil {
				t.Fatal(err)
			}
			addrs := len(r.ipamFiles())
			r.write("fail-del", "")
			if err := r.del("1.1.0", "c1", "ai-training", "trainer-0"); err != nil {
				t.Fatalf("DEL with its record kept must succeed (the pod can go; the retry is recorded): %v", err)
			}
			rec, ok := r.record("c1")
			if !ok || rec.Pending == nil {
				t.Fatalf("the failed DEL forgot its record: %+v", rec)
			}
			if len(rec.Delegates) != 1 || rec.Delegates[0].Network != "ai-training/flaky" || !strings.Contains(rec.Delegates[0].DelError, "fails while") {
				t.Fatalf("pending record keeps %+v, want only the failed delegate with its error", rec.Delegates)
			}
			if links := netnsutil.Links(t, r.pod); !contains(links, "net1") || contains(links, "eth0") {
				t.Fatalf("pod links %v: eth0 must be gone, net1 (the failed delegate) still there", links)
			}
			if got := len(r.ipamFiles()); got != addrs-1 {
				t.Fatalf("%d addresses reserved, want %d (the failed delegate's)", got, addrs-1)
			}
			if tc.retry != nil {
				// still failing: the next DEL retries, fails, counts
				if err := r.del("1.1.0", "c1", "ai-training", "trainer-0"); err != nil {
					t.Fatal(err)
				}
				if rec, _ := r.record("c1"); rec == nil || rec.Pending == nil || rec.Pending.Attempts != 2 {
					t.Fatalf("after a second failing DEL: %+v", rec)
				}
			}
			os.Remove(marker)
			if tc.retry != nil {
				tc.retry(r)
			} else {
				for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					if _, ok := r.record("c1"); !ok {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the daemon did not retry the pending DEL")
					}
				}
			}
			if rec, ok := r.record("c1"); ok {
				t.Fatalf("record still there after the retry: %+v", rec.Pending)
			}
			if links := netnsutil.Links(t, r.pod); len(links) != 1 {
				t.Fatalf("after the retry the pod still has %v", links)
			}
			if f := r.ipamFiles(); len(f) != 0 {
				t.Fatalf("after the retry addresses are still reserved: %v", f)
			}
			if metrics != "" {
				page := r.scrape(metrics)
				for _, want := range []string{
					`rdmanet_meta_delegate_del_attempts_total{phase="del",result="error"} 1`,
					`rdmanet_meta_delegate_del_attempts_total{phase="retry",result="ok"} 1`,
					`rdmanet_meta_pending_dels_released_total 1`,
				} {
					if !strings.Contains(page, want) {
						t.Errorf("metrics lack %s:\n%s", want, grepLines(page, "rdmanet_meta"))
					}
				}
			} else if !strings.Contains(r.log(), "pending DEL completed") {
				t.Fatalf("the release is not logged:\n%s", r.log())
			}
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAddRollbackFailureIsKept: a failed ADD whose rollback cannot DEL a
// delegate keeps that delegate pending instead of dropping the record; the
// next DEL releases it (defect 1).
func TestAddRollbackFailureIsKept(t *testing.T) {
	r := newRig(t)
	marker := filepath.Join(r.dir, "fail-del")
	r.write("fail-del", "")
	r.nad("ai-training", "flaky", "", flakyChain(r, "flaky", "10.60.2.0/24", marker))
	r.nad("ai-training", "broken", "", macvlanConf("broken", "no-such-master", "10.80.0.0/24", r))
	r.podManifest("ai-training", "trainer-0", "flaky,broken", "")
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err == nil {
		t.Fatal("ADD succeeded")
	}
	rec, ok := r.record("c1")
	if !ok || rec.Pending == nil || len(rec.Delegates) != 1 || rec.Delegates[0].Network != "ai-training/flaky" {
		t.Fatalf("the rollback forgot what it could not remove: %+v", rec)
	}
	os.Remove(marker)
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.record("c1"); ok {
		t.Fatal("record still there")
	}
	if links := netnsutil.Links(t, r.pod); len(links) != 1 {
		t.Fatalf("pod still has %v", links)
	}
	if f := r.ipamFiles(); len(f) != 0 {
		t.Fatalf("addresses still reserved: %v", f)
	}
}

// TestDelFailsWhenItCannotKeepTheRecord: if what a DEL left behind cannot be
// recorded, DEL fails, so that kubelet retries it (defect 1).
func TestDelFailsWhenItCannotKeepTheRecord(t *testing.T) {
	r := newRig(t)
	marker := filepath.Join(r.dir, "fail-del")
	r.nad("ai-training", "flaky", "", flakyChain(r, "flaky", "10.60.2.0/24", marker))
	r.podManifest("ai-training", "trainer-0", "flaky", "")
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	r.write("fail-del", "")
	// the record's path turns into a non-empty directory: unreadable (DEL
	// falls back to libcni's cache) and impossible to replace
	cache := filepath.Join(r.dir, "cni", "cache", "c1.json")
	if err := os.Remove(cache); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "blocker"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := r.del("1.0.0", "c1", "ai-training", "trainer-0")
	if err == nil || !strings.Contains(err.Error(), "could not be kept") || !strings.Contains(err.Error(), "flaky (net1)") {
		t.Fatalf("DEL error = %v, want a failure naming the delegate left behind", err)
	}
	// once the record can be written again, kubelet's retry finishes the job
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	os.Remove(marker)
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	if links := netnsutil.Links(t, r.pod); len(links) != 1 {
		t.Fatalf("pod still has %v", links)
	}
}

// TestDelFromCacheWhatever the config state: a DEL of an attached
// container works from its cache when the kubeconfig has gone missing
// since ADD (defect 2).
func TestDelFromCacheWithBrokenConfig(t *testing.T) {
	r := newRig(t)
	r.nad("ai-training", "face-training-rdma", "", macvlanConf("face-training-rdma", "roce0", "10.60.1.0/24", r))
	r.podManifest("ai-training", "trainer-0", "face-training-rdma", "")
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	r.conf["source"] = map[string]any{"type": "kubernetes"}
	r.conf["kubeconfig"] = filepath.Join(r.dir, "no-such-kubeconfig")
	r.conf["clusterNetwork"] = "no-such-network"
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatalf("DEL from the cache with the kubeconfig gone: %v", err)
	}
	if links := netnsutil.Links(t, r.pod); len(links) != 1 {
		t.Fatalf("DEL left %v", links)
	}
	if f := r.ipamFiles(); len(f) != 0 {
		t.Fatalf("DEL leaked addresses: %v", f)
	}
}

// TestDelWithNothingToCleanUp: a DEL of a container rdmanet never added
// succeeds, quickly, whatever the state of the configuration — through the
// per-call plugin and through the daemon (defect 2).
func TestDelWithNothingToCleanUp(t *testing.T) {
	bin := plugins(t)
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable.kubeconfig")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// a daemon whose informers never synced anything: DEL must not need them
	dsock := filepath.Join(dir, "d.sock")
	d := &daemon.MetaServer{Socket: dsock, Source: &meta.StaticSource{Dir: filepath.Join(dir, "nothing"), StatusDir: dir}, Log: discardLog()}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(dsock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon did not start")
		}
	}
	// a shim installed without rdmanet-direct next to it
	lonely := t.TempDir()
	shim, err := os.ReadFile(filepath.Join(bin, "rdmanet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lonely, "rdmanet"), shim, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		conf map[string]any // on top of a minimal config
		bin  string
	}{
		{name: "kubeconfig file missing", conf: map[string]any{"kubeconfig": filepath.Join(dir, "no-such.kubeconfig")}},
		{name: "no kubeconfig in the config", conf: map[string]any{}},
		{name: "API server unreachable", conf: map[string]any{"kubeconfig": unreachable}},
		{name: "clusterNetwork resolves nowhere (NAD and confDir missing)", conf: map[string]any{"kubeconfig": unreachable, "clusterNetwork": "gone", "confDir": filepath.Join(dir, "no-conf")}},
		{name: "no default network at all", conf: map[string]any{"kubeconfig": unreachable, "clusterNetwork": nil}},
		{name: "static source directory missing", conf: map[string]any{"source": map[string]any{"type": "static", "dir": filepath.Join(dir, "gone")}}},
		{name: "invalid fields (unknown source, bad timeout, bad log level)", conf: map[string]any{"source": map[string]any{"type": "etcd"}, "apiTimeout": "soon", "logLevel": "loud"}},
		{name: "PodResources socket missing", conf: map[string]any{"kubeconfig": unreachable, "podResourcesSocket": filepath.Join(dir, "no.sock")}},
		{name: "daemon configured but down, rdmanet-direct not installed", conf: map[string]any{"daemonSocket": filepath.Join(dir, "down.sock")}, bin: lonely},
	}
	for _, via := range []string{"per call", "daemon"} {
		for _, tc := range tests {
			t.Run(via+"/"+tc.name, func(t *testing.T) {
				if via == "daemon" && tc.bin != "" {
					t.Skip("the daemon case needs the daemon up")
				}
				c := map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet", "clusterNetwork": "k8s-pod-network",
					"cniDir": filepath.Join(t.TempDir(), "cni"), "binDir": bin, "logFile": filepath.Join(dir, "rdmanet.log")}
				for k, v := range tc.conf {
					if v == nil {
						delete(c, k)
					} else {
						c[k] = v
					}
				}
				if via == "daemon" {
					c["daemonSocket"] = dsock
				}
				b, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "plugins": []any{c}})
				if err != nil {
					t.Fatal(err)
				}
				l, err := libcni.ConfListFromBytes(b)
				if err != nil {
					t.Fatal(err)
				}
				path := bin
				if tc.bin != "" {
					path = tc.bin
				}
				cni := libcni.NewCNIConfigWithCacheDir([]string{path}, filepath.Join(t.TempDir(), "runtime-cache"), nil)
				rt := &libcni.RuntimeConf{ContainerID: "never-added", IfName: "eth0",
					Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "ai"}, {"K8S_POD_NAME", "gone"}}}
				start := time.Now()
				if err := cni.DelNetworkList(context.Background(), l, rt); err != nil {
					t.Fatalf("DEL with nothing to clean up failed: %v", err)
				}
				if took := time.Since(start); took > 5*time.Second {
					t.Fatalf("DEL took %s", took)
				}
			})
		}
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
