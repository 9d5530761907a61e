// Package e2e runs the seed's exclusive-mode flow end to end: a real
// kube-apiserver + etcd holds the face-training-rdma NAD and a pod of the
// face-trainer Job; a PodResources server answers as kubelet does; the
// rdmanet meta CNI is invoked through libcni in real network namespaces and
// runs the default network (upstream bridge) and the NAD's chain (sriov →
// rdma → rdmanet-ipam under the Whereabouts name) on a simulated VF.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/apiserver"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
	"github.com/rdmanet/rdmanet/test/seeds"
)

var binDir string

func TestMain(m *testing.M) {
	code := 1
	dir, err := os.MkdirTemp("", "rdmanet-e2e-bin-")
	if err == nil {
		binDir = dir
		err = buildPlugins(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build plugins:", err)
	} else {
		code = m.Run()
	}
	apiserver.StopShared()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildPlugins builds every binary the flow execs into dir (rdmanet-ipam
// also as "whereabouts", the name the seed NAD uses), and the InfiniBand
// drop-ins, which rdmanet-install copies from the same directory as the
// image's other CNI binaries (TestDeployRBAC runs it on dir).
func buildPlugins(dir string) error {
	return pluginbin.Build(dir, pluginbin.Meta, pluginbin.MetaDirect, pluginbin.MetaDaemon, pluginbin.SRIOV, pluginbin.RDMA,
		pluginbin.IPAM, pluginbin.Bridge, pluginbin.Macvlan, pluginbin.HostLocal, testPlugin, ibSRIOVPlugin, ipoibPlugin)
}

// The InfiniBand CNI plugins (docs/infiniband.md).
const (
	ibSRIOVPlugin = "github.com/rdmanet/rdmanet/cmd/ib-sriov"
	ipoibPlugin   = "github.com/rdmanet/rdmanet/cmd/ipoib"
)

// testPlugin is rdmanet's configurable test delegate (a DEL that fails
// while a file exists).
const testPlugin = "github.com/rdmanet/rdmanet/internal/cni/meta/testplugin"

// seedNAD is spec.config of the exclusive seed's face-training-rdma NAD,
// read from examples/seeds.
var seedNAD = seeds.ExclusiveNADConfig()

const (
	resourceName = "example.com/sriov_rdma"
	pfName       = "enp65s0f0np0"
	pfBDF        = "0000:41:00.0"
	nodeName     = "gpu-node-1"
)

type podResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	devices map[string][]string // ns/name -> VF PCI addresses of resourceName
}

func (s *podResources) Get(_ context.Context, r *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	pr := &podresourcesapi.PodResources{Name: r.PodName, Namespace: r.PodNamespace, Containers: []*podresourcesapi.ContainerResources{{Name: "trainer"}}}
	if ids := s.devices[r.PodNamespace+"/"+r.PodName]; len(ids) > 0 {
		pr.Containers[0].Devices = []*podresourcesapi.ContainerDevices{{ResourceName: resourceName, DeviceIds: ids}}
	}
	return &podresourcesapi.GetPodResourcesResponse{PodResources: pr}, nil
}

// List answers as kubelet does for every pod with devices (Multus reads
// the allocation this way).
func (s *podResources) List(_ context.Context, _ *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	var out []*podresourcesapi.PodResources
	for key, ids := range s.devices {
		nsName, name, _ := strings.Cut(key, "/")
		out = append(out, &podresourcesapi.PodResources{Name: name, Namespace: nsName, Containers: []*podresourcesapi.ContainerResources{{Name: "trainer",
			Devices: []*podresourcesapi.ContainerDevices{{ResourceName: resourceName, DeviceIds: ids}}}}})
	}
	return &podresourcesapi.ListPodResourcesResponse{PodResources: out}, nil
}

type env struct {
	t         testing.TB
	api       *apiserver.Server
	core      kubernetes.Interface
	dir       string
	host, pod ns.NetNS
	fix       *sysfsfixture.Standard
	rec       *netops.Recorder
	pr        *podResources
	cni       *libcni.CNIConfig
	conf      map[string]any
	origVF    netops.Link
}

func vfNetdev(i int) string { return fmt.Sprintf("enp65s0f0v%d", i) }

func setup(t *testing.T) *env { return setupTB(t) }

func setupTB(t testing.TB) *env {
	netnsutil.RequireRoot(t)
	api := apiserver.Shared(t)
	e := &env{t: t, api: api, dir: t.TempDir(), pr: &podResources{devices: map[string][]string{}}}
	var err error
	if e.core, err = kubernetes.NewForConfig(api.Config()); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(e.dir, "kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	// simulated node: 4 VFs of the RoCE PF, veth ends in a host namespace
	e.fix, err = sysfsfixture.NewStandard(filepath.Join(e.dir, "sys"), sysfsfixture.StandardOptions{RoCEVFs: 4, VFNetdev: vfNetdev})
	if err != nil {
		t.Fatal(err)
	}
	e.host, e.pod = netnsutil.NewNS(t), netnsutil.NewNS(t)
	netnsutil.RelayAPIServer(t, e.host, kubeconfig)
	netnsutil.SimulateVFs(t, e.host, vfNetdev(0), vfNetdev(1), vfNetdev(2), vfNetdev(3))
	e.origVF, _ = netnsutil.Link(t, e.host, vfNetdev(1))
	e.rec = netops.NewRecorder(filepath.Join(e.dir, "netops.json"))
	if err := e.rec.SetNetnsMode(netops.RDMANetnsExclusive); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		netops.EnvImpl: "record", netops.EnvState: e.rec.StatePath(),
		"RDMANET_SYSFS_ROOT": e.fix.Root, "RDMANET_CNI_STATE_DIR": filepath.Join(e.dir, "state"),
		"RDMANET_IPAM_STORE_PATH": filepath.Join(e.dir, "ipam"), "RDMANET_IPAM_STORE_TYPE": "local", "NODENAME": nodeName, netops.EnvFault: "",
	} {
		t.Setenv(k, v)
	}
	for _, d := range []string{"conf", "devinfo", "hostlocal"} {
		if err := os.MkdirAll(filepath.Join(e.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	def := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"cluster-net","plugins":[{"type":"bridge","bridge":"cni0","isDefaultGateway":true,
		"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.1.0/24"}]],"dataDir":%q}}]}`, filepath.Join(e.dir, "hostlocal"))
	if err := os.WriteFile(filepath.Join(e.dir, "conf", "00-cluster.conflist"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(e.dir, "pod-resources.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(g, e.pr)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	e.conf = map[string]any{
		"cniVersion": "1.0.0", "name": "rdmanet", "type": "rdmanet", "kubeconfig": kubeconfig,
		"clusterNetwork": "cluster-net", "confDir": filepath.Join(e.dir, "conf"), "cniDir": filepath.Join(e.dir, "cni"),
		"binDir": binDir, "podResourcesSocket": sock, "deviceInfoDir": filepath.Join(e.dir, "devinfo"),
		"logFile": filepath.Join(e.dir, "rdmanet.log"), "logLevel": "debug", "delTimeout": "20s", "apiTimeout": "5s",
	}
	e.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir}, filepath.Join(e.dir, "runtime-cache"), nil)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(e.dir, "rdmanet.log"))
			t.Logf("rdmanet log:\n%s", b)
			logs, _ := filepath.Glob(filepath.Join(api.Dir(), "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("%s (tail):\n%s", l, b)
			}
		}
	})
	return e
}

// seedObjects creates the namespace, the seed NAD and a pod of the seed Job
// (its template: JSON-form networks annotation, the pool's resource).
func (e *env) seedObjects(ns, pod string) *corev1.Pod {
	t := e.t
	ctx := context.Background()
	if _, err := e.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	nc, err := nadclient.NewForConfig(e.api.Config())
	if err != nil {
		t.Fatal(err)
	}
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "face-training-rdma", Namespace: ns,
		Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": resourceName}}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: seedNAD}}
	if _, err := nc.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(ctx, nad, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	q := resource.MustParse("1")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns, Labels: map[string]string{"app": "face-trainer"},
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "[{\"name\": \"face-training-rdma\", \"interface\": \"net1\"}]\n", "team": "vision"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Subdomain: "face-rdzv", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "trainer", Image: "registry.example.com/ai/face-training:v1",
				Env: []corev1.EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=net1"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{resourceName: q}, Limits: corev1.ResourceList{resourceName: q}}}}},
	}
	created, err := e.core.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func (e *env) list() *libcni.NetworkConfigList {
	b, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "rdmanet", "plugins": []any{e.conf}})
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := libcni.ConfListFromBytes(b)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) rt(container string, pod *corev1.Pod, uid string) *libcni.RuntimeConf {
	if uid == "" {
		uid = string(pod.UID)
	}
	return &libcni.RuntimeConf{ContainerID: container, NetNS: e.pod.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", pod.Namespace}, {"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", container}, {"K8S_POD_UID", uid}}}
}

func (e *env) add(rt *libcni.RuntimeConf) error {
	return e.host.Do(func(ns.NetNS) error {
		_, err := e.cni.AddNetworkList(context.Background(), e.list(), rt)
		return err
	})
}

func (e *env) del(rt *libcni.RuntimeConf) error {
	return e.host.Do(func(ns.NetNS) error { return e.cni.DelNetworkList(context.Background(), e.list(), rt) })
}

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// assertVFHome: the VF netdev is back in the host under its name and MAC,
// its settings and RDMA device restored, its address released.
func (e *env) assertVFHome(i int) {
	t := e.t
	t.Helper()
	l, ok := netnsutil.Link(t, e.host, vfNetdev(i))
	if !ok {
		t.Fatalf("VF %d (%s) is not back in the host; host has %v", i, vfNetdev(i), netnsutil.Links(t, e.host))
	}
	if l.MAC.String() != e.origVF.MAC.String() && i == 1 {
		t.Fatalf("VF MAC %s, want %s", l.MAC, e.origVF.MAC)
	}
	st, err := e.rec.VFState(pfName, i)
	if err != nil || st != netops.DefaultVFState() {
		t.Fatalf("VF %d settings %+v (%v), want defaults", i, st, err)
	}
	if home, err := e.rec.RDMAHome(e.fix.RDMAByBD[sysfsfixture.VFBDF(pfBDF, i)]); err != nil || !home {
		t.Fatalf("RDMA device of VF %d not home (%v)", i, err)
	}
}

// allocateVF does what kubelet and the agent do when the pod gets VF i:
// PodResources reports it for the pod, and its device-info file is written
// (as the agent's Allocate writes it). It returns the VF's PCI address and
// RDMA device.
func (e *env) allocateVF(podKey string, i int) (vf, rdmaDev string) {
	e.t.Helper()
	vf = sysfsfixture.VFBDF(pfBDF, i)
	rdmaDev = e.fix.RDMAByBD[vf]
	e.pr.devices[podKey] = []string{vf}
	if err := devinfo.Write(filepath.Join(e.dir, "devinfo"), resourceName, vf, devinfo.PCI(vf, pfBDF, rdmaDev)); err != nil {
		e.t.Fatal(err)
	}
	return vf, rdmaDev
}

func TestSeedFlowOnRealAPIServer(t *testing.T) {
	e := setup(t)
	pod := e.seedObjects("ai-training", "face-trainer-0")
	vf, rdmaDev := e.allocateVF("ai-training/face-trainer-0", 1)
	rt := e.rt("c-seed", pod, "")
	if err := e.add(rt); err != nil {
		t.Fatal(err)
	}
	links := netnsutil.Links(t, e.pod)
	if !contains(links, "eth0") || !contains(links, "net1") {
		t.Fatalf("pod links %v, want eth0 and net1", links)
	}
	if _, ok := netnsutil.Link(t, e.host, vfNetdev(1)); ok {
		t.Fatal("the VF netdev is still in the host namespace")
	}
	addrs := netnsutil.Addrs(t, e.pod, "net1")
	if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "10.60.") || strings.HasPrefix(addrs[0], "10.60.0.") {
		t.Fatalf("net1 addresses %v: want one in 10.60.0.0/16 outside the excluded 10.60.0.0/24", addrs)
	}
	if r := netnsutil.Routes(t, e.pod, "eth0"); !contains(r, "default") {
		t.Fatalf("eth0 routes %v: the default route must stay on eth0", r)
	}
	if r := netnsutil.Routes(t, e.pod, "net1"); contains(r, "default") {
		t.Fatalf("net1 routes %v: the training net gets no default route", r)
	}
	st, err := e.rec.VFState(pfName, 1)
	if err != nil || st.Vlan != 200 || !st.Spoofchk || st.Trust {
		t.Fatalf("VF 1 settings %+v (%v): want vlan 200, spoofchk on, trust off", st, err)
	}
	if in, err := e.rec.InNetns(rdmaDev, e.pod); err != nil || !in {
		t.Fatalf("RDMA device %s not in the pod netns (%v)", rdmaDev, err)
	}
	// network-status on the pod, in NPWG format, naming the VF
	got, err := e.core.CoreV1().Pods("ai-training").Get(context.Background(), "face-trainer-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var status []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(got.Annotations["k8s.v1.cni.cncf.io/network-status"]), &status); err != nil {
		t.Fatalf("network-status: %v", err)
	}
	if len(status) != 2 || !status[0].Default || status[0].Interface != "eth0" || status[1].Name != "ai-training/face-training-rdma" ||
		status[1].Interface != "net1" || status[1].DeviceInfo == nil || status[1].DeviceInfo.Type != "pci" ||
		status[1].DeviceInfo.Pci.PciAddress != vf || status[1].DeviceInfo.Pci.RdmaDevice != rdmaDev || len(status[1].IPs) != 1 {
		t.Fatalf("network-status = %+v", status)
	}
	// nothing else on the pod touched
	if got.Annotations["team"] != "vision" || got.Labels["app"] != "face-trainer" || len(got.Annotations) != 3 || got.Spec.NodeName != nodeName {
		t.Fatalf("pod metadata changed beyond network-status: %v %v", got.Labels, got.Annotations)
	}
	if err := e.del(rt); err != nil {
		t.Fatal(err)
	}
	if links := netnsutil.Links(t, e.pod); len(links) != 1 {
		t.Fatalf("after DEL the pod keeps %v", links)
	}
	e.assertVFHome(1)
}

func TestSeedFlowFailures(t *testing.T) {
	e := setup(t)
	pod := e.seedObjects("ai-training", "face-trainer-1")
	vf := sysfsfixture.VFBDF(pfBDF, 2)
	tests := []struct {
		name    string
		devices []string
		uid     string
		want    string
	}{
		{"resource not allocated to the pod", nil, "", `kubelet allocated the pod 0 such device(s)`},
		{"pod deleted and recreated during ADD", []string{vf}, "0000-stale-uid", "deleted and recreated during ADD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.pr.devices["ai-training/face-trainer-1"] = tc.devices
			err := e.add(e.rt("c-fail", pod, tc.uid))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ADD error %v, want %q", err, tc.want)
			}
			if links := netnsutil.Links(t, e.pod); len(links) != 1 {
				t.Fatalf("failed ADD left %v in the pod", links)
			}
			e.assertVFHome(2)
		})
	}
	t.Run("API server stopped before DEL", func(t *testing.T) {
		e.t = t
		e.pr.devices["ai-training/face-trainer-1"] = []string{vf}
		rt := e.rt("c-apidown", pod, "")
		if err := e.add(rt); err != nil {
			t.Fatal(err)
		}
		if err := e.api.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := e.api.RestartAPIServer(context.Background()); err != nil {
				t.Fatalf("restart API server: %v", err)
			}
		}()
		start := time.Now()
		if err := e.del(rt); err != nil {
			t.Fatalf("DEL with the API server down must succeed from the cache: %v", err)
		}
		t.Logf("DEL without API server took %s", time.Since(start))
		if links := netnsutil.Links(t, e.pod); len(links) != 1 {
			t.Fatalf("after DEL the pod keeps %v", links)
		}
		e.assertVFHome(2)
	})
	t.Run("pod deleted before ADD", func(t *testing.T) {
		e.t = t
		if err := e.core.CoreV1().Pods("ai-training").Delete(context.Background(), "face-trainer-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		err := e.add(e.rt("c-gone", pod, ""))
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("ADD error %v, want pod not found", err)
		}
		if links := netnsutil.Links(t, e.pod); len(links) != 1 {
			t.Fatalf("failed ADD left %v in the pod", links)
		}
	})
}

// podWithNetworks creates (in an existing namespace) a pod of the seed Job's
// shape with the given networks annotation.
func (e *env) podWithNetworks(ns, name, networks string) *corev1.Pod {
	e.t.Helper()
	q := resource.MustParse("1")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": networks}},
		Spec: corev1.PodSpec{NodeName: nodeName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "trainer", Image: "registry.example.com/ai/face-training:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{resourceName: q}, Limits: corev1.ResourceList{resourceName: q}}}}},
	}
	created, err := e.core.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// TestSeedDeviceIDFromAnnotation: a pod that names a VF in its networks
// annotation gets it only when kubelet allocated that VF to it; another
// VF is refused with the pod, the network, the VF and the allowed devices
// named, and stays untouched (defect 3).
func TestSeedDeviceIDFromAnnotation(t *testing.T) {
	e := setup(t)
	e.seedObjects("ai-devid", "face-trainer-0")
	mine, _ := e.allocateVF("ai-devid/thief-0", 1)
	other := sysfsfixture.VFBDF(pfBDF, 3)
	tests := []struct {
		name, deviceID string
		want           []string // error substrings; nil = ADD succeeds with mine
	}{
		{name: "another pod's VF", deviceID: other, want: []string{"ai-devid/thief-0", "ai-devid/face-training-rdma", other, "allowed devices: " + mine}},
		{name: "its own VF", deviceID: mine},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			pod := e.podWithNetworks("ai-devid", fmt.Sprintf("thief-%d", i), fmt.Sprintf(`[{"name":"face-training-rdma","interface":"net1","deviceID":%q}]`, tc.deviceID))
			e.pr.devices[pod.Namespace+"/"+pod.Name] = []string{mine}
			rt := e.rt(fmt.Sprintf("c-devid-%d", i), pod, "")
			err := e.add(rt)
			if tc.want != nil {
				if err == nil {
					t.Fatal("ADD with another pod's deviceID succeeded")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				e.assertVFHome(3)
				e.assertVFHome(1)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := netnsutil.Link(t, e.host, vfNetdev(1)); ok {
				t.Fatal("the pod's own VF is still in the host")
			}
			if err := e.del(rt); err != nil {
				t.Fatal(err)
			}
			e.assertVFHome(1)
		})
	}
}

// TestSeedDelWithKubeconfigGone: DEL succeeds with the kubeconfig file
// missing, for a container never added (kubelet's DEL of a sandbox whose
// ADD failed early) and for an added one, whose VF comes home from the
// cache (defect 2).
func TestSeedDelWithKubeconfigGone(t *testing.T) {
	e := setup(t)
	pod := e.seedObjects("ai-nokube", "face-trainer-0")
	e.allocateVF("ai-nokube/face-trainer-0", 2)
	rt := e.rt("c-nokube", pod, "")
	if err := e.add(rt); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.conf["kubeconfig"].(string)); err != nil {
		t.Fatal(err)
	}
	if err := e.del(e.rt("c-never-added", pod, "")); err != nil {
		t.Fatalf("DEL of a container never added, kubeconfig gone: %v", err)
	}
	if err := e.del(rt); err != nil {
		t.Fatalf("DEL of an added container, kubeconfig gone: %v", err)
	}
	if links := netnsutil.Links(t, e.pod); len(links) != 1 {
		t.Fatalf("after DEL the pod keeps %v", links)
	}
	e.assertVFHome(2)
}
