package meta_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"google.golang.org/grpc"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// plugins builds the meta plugin and the upstream bridge, host-local and
// macvlan plugins once per test binary, as a runtime would find them.
func plugins(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = pluginbin.TempDir("rdmanet-meta-bin-", pluginbin.Meta, pluginbin.MetaDirect, pluginbin.MetaDaemon,
			pluginbin.Bridge, pluginbin.Macvlan, pluginbin.HostLocal, pluginbin.Portmap, pluginbin.Bandwidth, testPluginImport)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// podResources answers as kubelet does.
type podResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	mu   sync.Mutex
	pods map[string]map[string][]string // ns/name -> resource -> ids
}

func (s *podResources) resources(podNS, name string) *podresourcesapi.PodResources {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := &podresourcesapi.PodResources{Name: name, Namespace: podNS}
	c := &podresourcesapi.ContainerResources{Name: "trainer"}
	res := s.pods[podNS+"/"+name]
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, r := range keys {
		c.Devices = append(c.Devices, &podresourcesapi.ContainerDevices{ResourceName: r, DeviceIds: res[r]})
	}
	pr.Containers = []*podresourcesapi.ContainerResources{c}
	return pr
}

func (s *podResources) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	return &podresourcesapi.GetPodResourcesResponse{PodResources: s.resources(req.PodNamespace, req.PodName)}, nil
}

func (s *podResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	s.mu.Lock()
	keys := make([]string, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for _, k := range keys {
		podNS, name, _ := strings.Cut(k, "/")
		resp.PodResources = append(resp.PodResources, s.resources(podNS, name))
	}
	return resp, nil
}

type rig struct {
	t         *testing.T
	dir       string
	bin       string
	host, pod ns.NetNS
	pr        *podResources
	conf      map[string]any
	cni       *libcni.CNIConfig
}

const defaultNet = `{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[{"type":"bridge","bridge":"cni0","isDefaultGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.1.0/24"}]],"dataDir":"%s"}}]}`

func newRig(t *testing.T) *rig {
	netnsutil.RequireRoot(t)
	r := &rig{t: t, dir: t.TempDir(), bin: plugins(t), pr: &podResources{pods: map[string]map[string][]string{}}}
	r.host, r.pod = netnsutil.NewNS(t), netnsutil.NewNS(t)
	// the RoCE PF stand-in: a veth end in the host namespace, macvlan's master
	netnsutil.AddVeth(t, r.host, "roce0", nil, "roce0peer", nil)
	netnsutil.SetUp(t, r.host, "roce0")
	netnsutil.SetUp(t, r.host, "roce0peer")
	for _, d := range []string{"conf", "manifests", "cni", "devinfo", "ipam"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.write("conf/00-default.conflist", fmt.Sprintf(defaultNet, filepath.Join(r.dir, "ipam")))
	sock := filepath.Join(r.dir, "pod-resources.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(g, r.pr)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	r.conf = map[string]any{
		"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet",
		"clusterNetwork": "k8s-pod-network", "confDir": filepath.Join(r.dir, "conf"),
		"cniDir": filepath.Join(r.dir, "cni"), "binDir": r.bin,
		"source":             map[string]any{"type": "static", "dir": filepath.Join(r.dir, "manifests")},
		"podResourcesSocket": sock, "deviceInfoDir": filepath.Join(r.dir, "devinfo"),
		"logFile": filepath.Join(r.dir, "rdmanet.log"), "logLevel": "debug",
	}
	r.cni = libcni.NewCNIConfigWithCacheDir([]string{r.bin}, filepath.Join(r.dir, "runtime-cache"), nil)
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(r.dir, "rdmanet.log")); err == nil {
				t.Logf("rdmanet log:\n%s", b)
			}
		}
	})
	return r
}

func (r *rig) write(rel, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, rel), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) nad(podNS, name, resource, config string) {
	ann := ""
	if resource != "" {
		ann = fmt.Sprintf("\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: %s", resource)
	}
	r.write("manifests/nad-"+podNS+"-"+name+".yaml", fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: %s
  namespace: %s%s
spec:
  config: '%s'
`, name, podNS, ann, config))
}

func (r *rig) podManifest(podNS, name, networks, resources string) {
	r.write("manifests/pod-"+podNS+"-"+name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  uid: 1111-2222
  annotations:
    k8s.v1.cni.cncf.io/networks: '%s'
spec:
  containers:
  - name: trainer
    image: trainer:1
    resources:
      limits: {%s}
      requests: {%s}
`, name, podNS, networks, resources, resources))
}

func macvlanConf(name, master, subnet string, r *rig) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"%s","type":"macvlan","master":"%s","mode":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"%s"}]],"dataDir":"%s"}}`,
		name, master, subnet, filepath.Join(r.dir, "ipam"))
}

func (r *rig) metaList(version string) *libcni.NetworkConfigList {
	r.t.Helper()
	c := map[string]any{}
	for k, v := range r.conf {
		c[k] = v
	}
	c["cniVersion"] = version
	b, err := json.Marshal(map[string]any{"cniVersion": version, "name": "rdmanet", "plugins": []any{c}})
	if err != nil {
		r.t.Fatal(err)
	}
	l, err := libcni.ConfListFromBytes(b)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}

func (r *rig) rt(container, podNS, name string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: container, NetNS: r.pod.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", podNS}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", container}, {"K8S_POD_UID", "1111-2222"}}}
}

func (r *rig) add(version, container, podNS, name string) (string, error) {
	var out string
	err := r.host.Do(func(ns.NetNS) error {
		res, err := r.cni.AddNetworkList(context.Background(), r.metaList(version), r.rt(container, podNS, name))
		if err == nil {
			b, jerr := json.Marshal(res)
			out = string(b)
			err = jerr
		}
		return err
	})
	return out, err
}

func (r *rig) del(version, container, podNS, name string) error {
	return r.host.Do(func(ns.NetNS) error {
		return r.cni.DelNetworkList(context.Background(), r.metaList(version), r.rt(container, podNS, name))
	})
}

func (r *rig) status(podNS, name string) []nadv1.NetworkStatus {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "cni", "status", podNS+"_"+name+".json"))
	if err != nil {
		r.t.Fatalf("network-status: %v", err)
	}
	var st []nadv1.NetworkStatus
	if err := json.Unmarshal(b, &st); err != nil {
		r.t.Fatalf("network-status: %v\n%s", err, b)
	}
	return st
}

// eventualStatus waits (bounded) for network-status written after ADD returned.
func (r *rig) eventualStatus(podNS, name string) []nadv1.NetworkStatus {
	r.t.Helper()
	path := filepath.Join(r.dir, "cni", "status", podNS+"_"+name+".json")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			break
		}
	}
	return r.status(podNS, name)
}

// ipamFiles lists host-local's reservations (one file per address).
func (r *rig) ipamFiles() []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(r.dir, "ipam"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && net.ParseIP(d.Name()) != nil {
			out = append(out, d.Name())
		}
		return nil
	})
	return out
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func TestAttachDefaultAndAttachmentsAllVersions(t *testing.T) {
	tests := []struct {
		name, version string
		concurrent    bool
	}{
		{name: "0.3.1", version: "0.3.1"},
		{name: "0.4.0", version: "0.4.0"},
		{name: "1.0.0", version: "1.0.0"},
		{name: "1.1.0", version: "1.1.0"},
		{name: "1.0.0 concurrentNetworks", version: "1.0.0", concurrent: true},
	}
	for _, tc := range tests {
		version := tc.version
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.conf["concurrentNetworks"] = tc.concurrent
			r.nad("ai-training", "face-training-rdma", "example.com/sriov_rdma", macvlanConf("face-training-rdma", "roce0", "10.60.1.0/24", r))
			r.nad("default", "shared-net", "", macvlanConf("shared-net", "roce0", "10.70.0.0/24", r))
			r.podManifest("ai-training", "trainer-0", `[{"name": "face-training-rdma", "interface": "net1"}, {"name":"shared-net","namespace":"default"}]`,
				`example.com/sriov_rdma: "1"`)
			r.pr.pods["ai-training/trainer-0"] = map[string][]string{"example.com/sriov_rdma": {"0000:41:00.2"}}
			if err := devinfo.Write(filepath.Join(r.dir, "devinfo"), "example.com/sriov_rdma", "0000:41:00.2", devinfo.PCI("0000:41:00.2", "0000:41:00.0", "mlx5_4")); err != nil {
				t.Fatal(err)
			}
			res, err := r.add(version, "c1", "ai-training", "trainer-0")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res, "10.244.1.") {
				t.Fatalf("result must be the default network's: %s", res)
			}
			links := netnsutil.Links(t, r.pod)
			for _, want := range []string{"eth0", "net1", "net2"} {
				if !contains(links, want) {
					t.Fatalf("pod links %v lack %s", links, want)
				}
			}
			if rs := netnsutil.Routes(t, r.pod, "eth0"); !contains(rs, "default") {
				t.Fatalf("eth0 routes %v lack the default route", rs)
			}
			for _, ifn := range []string{"net1", "net2"} {
				if rs := netnsutil.Routes(t, r.pod, ifn); contains(rs, "default") {
					t.Fatalf("%s has a default route: %v", ifn, rs)
				}
			}
			st := r.status("ai-training", "trainer-0")
			if len(st) != 3 || st[0].Name != "k8s-pod-network" || !st[0].Default || st[0].Interface != "eth0" {
				t.Fatalf("network-status = %+v", st)
			}
			if st[1].Name != "ai-training/face-training-rdma" || st[1].Interface != "net1" || len(st[1].IPs) != 1 || !strings.HasPrefix(st[1].IPs[0], "10.60.1.") ||
				st[1].DeviceInfo == nil || st[1].DeviceInfo.Pci.PciAddress != "0000:41:00.2" || st[1].DeviceInfo.Pci.RdmaDevice != "mlx5_4" {
				t.Fatalf("net1 status = %+v", st[1])
			}
			if st[2].Name != "default/shared-net" || st[2].Interface != "net2" || st[2].DeviceInfo != nil {
				t.Fatalf("net2 status = %+v", st[2])
			}
			// CHECK passes through
			if version != "0.3.1" {
				if err := r.host.Do(func(ns.NetNS) error {
					return r.cni.CheckNetworkList(context.Background(), r.metaList(version), r.rt("c1", "ai-training", "trainer-0"))
				}); err != nil {
					t.Fatalf("CHECK: %v", err)
				}
			}
			if err := r.del(version, "c1", "ai-training", "trainer-0"); err != nil {
				t.Fatal(err)
			}
			if links := netnsutil.Links(t, r.pod); len(links) != 1 {
				t.Fatalf("after DEL the pod still has %v", links)
			}
			if f := r.ipamFiles(); len(f) != 0 {
				t.Fatalf("addresses leaked: %v", f)
			}
			// DEL again: idempotent
			if err := r.del(version, "c1", "ai-training", "trainer-0"); err != nil {
				t.Fatalf("second DEL: %v", err)
			}
		})
	}
}

func TestAddFailuresRollBack(t *testing.T) {
	tests := []struct {
		name      string
		networks  string
		resources string
		devices   []string
		setup     func(r *rig)
		want      []string
	}{
		{
			name: "attachment fails while the others run concurrently", networks: `face-training-rdma,broken`, resources: `example.com/sriov_rdma: "1"`, devices: []string{"0000:41:00.3"},
			setup: func(r *rig) {
				r.conf["concurrentNetworks"] = true
				r.nad("ai-training", "broken", "", macvlanConf("broken", "no-such-master", "10.80.0.0/24", r))
			},
			want: []string{"network ai-training/broken (net2)"},
		},
		{
			name: "NAD missing", networks: `[{"name":"nope"}]`,
			want: []string{"ai-training/trainer-0", "NetworkAttachmentDefinition ai-training/nope does not exist"},
		},
		{
			name: "resource name mismatch", networks: `[{"name":"face-training-rdma"}]`, resources: `example.com/sriov_rmda: "1"`,
			want: []string{"face-training-rdma", `"example.com/sriov_rdma"`, "example.com/sriov_rmda=1", "three places"},
		},
		{
			name: "second attachment fails half way", networks: `face-training-rdma,broken`, resources: `example.com/sriov_rdma: "1"`, devices: []string{"0000:41:00.3"},
			setup: func(r *rig) {
				r.nad("ai-training", "broken", "", macvlanConf("broken", "no-such-master", "10.80.0.0/24", r))
			},
			want: []string{"network ai-training/broken (net2)"},
		},
		{
			name: "network-status cannot be written (pod gone): everything rolled back", networks: `face-training-rdma`, resources: `example.com/sriov_rdma: "1"`, devices: []string{"0000:41:00.5"},
			setup: func(r *rig) {
				// a file where the status directory should be makes the write fail
				if err := os.MkdirAll(filepath.Join(r.dir, "cni"), 0o755); err != nil {
					r.t.Fatal(err)
				}
				r.write("cni/status", "not a directory")
			},
			want: []string{"network-status"},
		},
		{
			name: "namespace isolation", networks: `other/net`,
			setup: func(r *rig) {
				r.conf["namespaceIsolation"] = true
				r.conf["globalNamespaces"] = "kube-system"
				r.nad("other", "net", "", macvlanConf("net", "roce0", "10.90.0.0/24", r))
			},
			want: []string{"refused by namespaceIsolation", "other/net", "kube-system"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.nad("ai-training", "face-training-rdma", "example.com/sriov_rdma", macvlanConf("face-training-rdma", "roce0", "10.60.1.0/24", r))
			if tc.setup != nil {
				tc.setup(r)
			}
			r.podManifest("ai-training", "trainer-0", tc.networks, tc.resources)
			if tc.devices != nil {
				r.pr.pods["ai-training/trainer-0"] = map[string][]string{"example.com/sriov_rdma": tc.devices}
			}
			_, err := r.add("1.0.0", "c1", "ai-training", "trainer-0")
			if err == nil {
				t.Fatal("ADD succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if links := netnsutil.Links(t, r.pod); len(links) != 1 {
				t.Fatalf("failed ADD left links in the pod: %v", links)
			}
			if f := r.ipamFiles(); len(f) != 0 {
				t.Fatalf("failed ADD leaked addresses: %v", f)
			}
			if _, err := os.Stat(filepath.Join(r.dir, "cni", "cache", "c1.json")); !os.IsNotExist(err) {
				t.Fatalf("failed ADD left its cache: %v", err)
			}
		})
	}
}

func TestDelWithoutPodNADOrCache(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(r *rig)
	}{
		{"pod and NADs gone", func(r *rig) {
			if err := os.RemoveAll(filepath.Join(r.dir, "manifests")); err != nil {
				r.t.Fatal(err)
			}
		}},
		{"our cache gone: libcni's attachment cache is used", func(r *rig) {
			if err := os.RemoveAll(filepath.Join(r.dir, "cni", "cache")); err != nil {
				r.t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.nad("ai-training", "face-training-rdma", "", macvlanConf("face-training-rdma", "roce0", "10.60.1.0/24", r))
			r.podManifest("ai-training", "trainer-0", "face-training-rdma", "")
			if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
				t.Fatal(err)
			}
			tc.break_(r)
			if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
				t.Fatal(err)
			}
			if links := netnsutil.Links(t, r.pod); len(links) != 1 {
				t.Fatalf("DEL left %v", links)
			}
			if f := r.ipamFiles(); len(f) != 0 {
				t.Fatalf("DEL leaked addresses: %v", f)
			}
		})
	}
}

func TestDelAfterNetnsGone(t *testing.T) {
	r := newRig(t)
	r.nad("ai-training", "face-training-rdma", "", macvlanConf("face-training-rdma", "roce0", "10.60.1.0/24", r))
	r.podManifest("ai-training", "trainer-0", "face-training-rdma", "")
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	netnsutil.DeleteNS(t, r.pod)
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatalf("DEL after the netns is gone must succeed: %v", err)
	}
	if f := r.ipamFiles(); len(f) != 0 {
		t.Fatalf("DEL leaked addresses: %v", f)
	}
}

// TestDaemonMode runs the daemon in the host namespace (as the DaemonSet
// would) and checks that the shim hands calls to it; then stops it and
// checks that the shim falls back to the per-call plugin.
func TestDaemonMode(t *testing.T) {
	r := newRig(t)
	r.nad("ai-training", "face-training-rdma", "example.com/sriov_rdma", macvlanConf("face-training-rdma", "roce0", "10.60.1.0/24", r))
	r.podManifest("ai-training", "trainer-0", `[{"name": "face-training-rdma", "interface": "net1"}]`, `example.com/sriov_rdma: "1"`)
	r.pr.pods["ai-training/trainer-0"] = map[string][]string{"example.com/sriov_rdma": {"0000:41:00.4"}}
	sock := filepath.Join(r.dir, "daemon.sock")
	r.conf["daemonSocket"] = sock
	confFile := filepath.Join(r.dir, "rdmanet.conf")
	b, err := json.Marshal(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	r.write("rdmanet.conf", string(b))
	daemonLog := filepath.Join(r.dir, "daemon.log")
	logf, err := os.Create(daemonLog)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(r.bin, "rdmanet-daemon"), "--config", confFile, "--log-level", "debug",
		"--plugin-socket", filepath.Join(r.dir, "plugins.sock"))
	cmd.Stdout, cmd.Stderr = logf, logf
	netnsutil.Do(t, r.host, cmd.Start)
	stopped := false
	stop := func() {
		if !stopped {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
			stopped = true
		}
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(daemonLog)
			t.Fatalf("daemon did not come up:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	// the daemon writes network-status after answering ADD
	if st := r.eventualStatus("ai-training", "trainer-0"); len(st) != 2 || st[1].DeviceInfo.Pci.PciAddress != "0000:41:00.4" {
		t.Fatalf("network-status = %+v", st)
	}
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	logText, _ := os.ReadFile(daemonLog)
	if !strings.Contains(string(logText), "ADD done") {
		t.Fatalf("the daemon did not serve the ADD:\n%s", logText)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "rdmanet.log")); strings.Contains(string(b), "ADD done") {
		t.Fatalf("the per-call plugin ran although the daemon was up:\n%s", b)
	}
	// daemon down: the shim falls back to rdmanet-direct
	stop()
	if _, err := r.add("1.0.0", "c2", "ai-training", "trainer-0"); err != nil {
		t.Fatalf("fallback ADD: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "rdmanet.log")); !strings.Contains(string(b), "ADD done") {
		t.Fatalf("fallback did not run the per-call plugin:\n%s", b)
	}
	if err := r.del("1.0.0", "c2", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	if links := netnsutil.Links(t, r.pod); len(links) != 1 {
		t.Fatalf("DEL left %v", links)
	}
}

// TestDefaultRouteRequest: "default-route" in the annotation moves the
// pod's default route to that attachment and marks it default in
// network-status; without it the default route stays on eth0.
func TestDefaultRouteRequest(t *testing.T) {
	r := newRig(t)
	r.nad("ai-training", "shared-net", "", macvlanConf("shared-net", "roce0", "10.70.0.0/24", r))
	r.podManifest("ai-training", "trainer-0", `[{"name":"shared-net","interface":"net1","default-route":["10.70.0.1"]}]`, "")
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	if rs := netnsutil.Routes(t, r.pod, "net1"); !contains(rs, "default") {
		t.Fatalf("net1 routes %v lack the requested default route", rs)
	}
	if rs := netnsutil.Routes(t, r.pod, "eth0"); contains(rs, "default") {
		t.Fatalf("eth0 keeps a default route: %v", rs)
	}
	st := r.status("ai-training", "trainer-0")
	if len(st) != 2 || st[0].Default || !st[1].Default {
		t.Fatalf("network-status defaults = %+v", st)
	}
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
}

// rendezvousPlugin writes a CNI plugin (a shell script, as CNI allows) whose
// ADD of interface X marks X in dir and then waits up to 3 s for every
// interface in peers: it succeeds only if its peers run at the same time.
func (r *rig) rendezvousPlugin(peers ...string) string {
	r.t.Helper()
	dir := filepath.Join(r.dir, "rendezvous")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	name := "rendezvous-" + filepath.Base(r.dir)
	script := fmt.Sprintf(`#!/bin/sh
dir=%q
case "$CNI_COMMAND" in
ADD)
  touch "$dir/$CNI_IFNAME"
  i=0
  while [ $i -lt 60 ]; do
    all=1
    for p in %s; do [ -e "$dir/$p" ] || all=0; done
    [ $all = 1 ] && break
    sleep 0.05; i=$((i+1))
  done
  if [ $all != 1 ]; then
    echo '{"cniVersion":"1.0.0","code":11,"msg":"'$CNI_IFNAME' waited 3s for its peers: the delegates did not run concurrently"}'
    exit 1
  fi
  echo '{"cniVersion":"1.0.0","interfaces":[{"name":"'$CNI_IFNAME'","sandbox":"'$CNI_NETNS'"}],"ips":[]}'
  ;;
DEL) rm -f "$dir/$CNI_IFNAME" ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}' ;;
esac
`, dir, strings.Join(peers, " "))
	if err := os.WriteFile(filepath.Join(r.bin, name), []byte(script), 0o755); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { os.Remove(filepath.Join(r.bin, name)) })
	return name
}

// TestConcurrentNetworks: with concurrentNetworks the attachments run at
// the same time (two delegates that each wait for the other succeed), the
// status keeps the annotation's order; without it they run one after the
// other (the same pair times out) and the failed ADD leaves nothing.
func TestConcurrentNetworks(t *testing.T) {
	tests := []struct {
		name       string
		concurrent bool
		wantErr    string
	}{
		{name: "concurrent", concurrent: true},
		{name: "sequential (Multus order)", concurrent: false, wantErr: "did not run concurrently"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			plugin := r.rendezvousPlugin("net1", "net2")
			for _, n := range []string{"rdv-a", "rdv-b"} {
				r.nad("ai-training", n, "", fmt.Sprintf(`{"cniVersion":"1.0.0","name":"%s","type":"%s"}`, n, plugin))
			}
			r.podManifest("ai-training", "trainer-0", `rdv-a,rdv-b`, "")
			r.conf["concurrentNetworks"] = tc.concurrent
			_, err := r.add("1.0.0", "c1", "ai-training", "trainer-0")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ADD error = %v, want %q", err, tc.wantErr)
				}
				if links := netnsutil.Links(t, r.pod); len(links) != 1 {
					t.Fatalf("failed ADD left links in the pod: %v", links)
				}
				if f := r.ipamFiles(); len(f) != 0 {
					t.Fatalf("failed ADD leaked addresses: %v", f)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := r.status("ai-training", "trainer-0")
			if len(st) != 3 || st[0].Interface != "eth0" || st[1].Name != "ai-training/rdv-a" || st[1].Interface != "net1" || st[2].Name != "ai-training/rdv-b" || st[2].Interface != "net2" {
				t.Fatalf("network-status = %+v, want eth0, rdv-a/net1, rdv-b/net2 in annotation order", st)
			}
			if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
				t.Fatal(err)
			}
			if links := netnsutil.Links(t, r.pod); len(links) != 1 {
				t.Fatalf("after DEL the pod still has %v", links)
			}
		})
	}
}
