//go:build clustertest

package cluster_test

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

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/rdmanet/rdmanet/internal/dra"
	"github.com/rdmanet/rdmanet/test/cluster"
	"github.com/rdmanet/rdmanet/test/dragpu"
)

// gpuDriver is a test-only stand-in for NVIDIA's DRA GPU driver on the
// real node: test/dragpu publishes the fixture's GPUs (standard pcieRoot
// from the same helper over the same sysfs as rdmanet's agent), and this
// kubelet plugin, run inside the test process, prepares their claims with a
// CDI spec that sets NVIDIA_VISIBLE_DEVICES (there is no GPU driver behind
// them). Its sockets are made in the node's private directories and named
// to kubelet by the paths kubelet sees.
type gpuDriver struct {
	cdiDir string // host path of the node's /var/run/cdi
	gpus   map[string]dragpu.GPU
	log    func(string, ...any)
}

const gpuCDIKind = dragpu.DriverName + "/claim"

func (g *gpuDriver) specPath(uid types.UID) string {
	return filepath.Join(g.cdiDir, dragpu.DriverName+"-claim_"+string(uid)+".json")
}

func (g *gpuDriver) PrepareResourceClaims(_ context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		var res kubeletplugin.PrepareResult
		spec := &cdispec.Spec{Kind: gpuCDIKind}
		var bdfs []string
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != dragpu.DriverName {
				continue
			}
			gpu, ok := g.gpus[r.Device]
			if !ok {
				res.Err = fmt.Errorf("claim %s/%s: no GPU %s on this node", c.Namespace, c.Name, r.Device)
				break
			}
			name := string(c.UID) + "-" + r.Device
			// Every CDI device needs an edit of its own (an empty one
			// makes the whole spec invalid): its own address.
			spec.Devices = append(spec.Devices, cdispec.Device{Name: name, ContainerEdits: cdispec.ContainerEdits{
				Env: []string{fmt.Sprintf("RDMANET_FAKE_GPU_%d=%s", len(spec.Devices), gpu.BDF)}}})
			bdfs = append(bdfs, gpu.BDF)
			res.Devices = append(res.Devices, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
				CDIDeviceIDs: []string{gpuCDIKind + "=" + name}})
		}
		if res.Err == nil && len(spec.Devices) > 0 {
			spec.Devices[0].ContainerEdits.Env = append(spec.Devices[0].ContainerEdits.Env, "NVIDIA_VISIBLE_DEVICES="+strings.Join(bdfs, ","))
			spec.Version = "0.5.0"
			b, err := json.Marshal(spec)
			if err == nil {
				err = os.WriteFile(g.specPath(c.UID), b, 0o644)
			}
			res.Err = err
		}
		out[c.UID] = res
	}
	return out, nil
}

func (g *gpuDriver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		if err := os.Remove(g.specPath(c.UID)); err != nil && !os.IsNotExist(err) {
			out[c.UID] = err
		} else {
			out[c.UID] = nil
		}
	}
	return out, nil
}

func (g *gpuDriver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func (g *gpuDriver) HandleError(_ context.Context, err error, msg string) {
	g.log("fake GPU DRA driver: %s: %v", msg, err)
}

// startGPUDriver publishes node n's GPUs as gpu.nvidia.com devices with
// their DeviceClass and serves their kubelet plugin on that node until the
// test ends; returns the GPUs by device name.
func startGPUDriver(t *testing.T, n cluster.Node) map[string]dragpu.GPU {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", layout.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	c, cancel := context.WithCancel(context.Background())
	gpus, err := dragpu.Publish(c, cs, n.Name, layout.NodeSysfs(n))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if _, err := cs.ResourceV1().DeviceClasses().Create(c, dragpu.DeviceClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		cancel()
		t.Fatal(err)
	}
	byName := map[string]dragpu.GPU{}
	for _, g := range gpus {
		byName[g.Name] = g
	}
	hostPath := func(p string) string { return layout.NodeHostPath(n, p) }
	drv := &gpuDriver{cdiDir: hostPath("/run/cdi"), gpus: byName, log: t.Logf}
	listen := func(_ context.Context, path string) (net.Listener, error) {
		host := hostPath(path)
		if err := os.MkdirAll(filepath.Dir(host), 0o750); err != nil {
			return nil, err
		}
		_ = os.Remove(host)
		return net.Listen("unix", host)
	}
	pluginDir := kubeletplugin.KubeletPluginsDir + "/" + dragpu.DriverName
	h, err := kubeletplugin.Start(c, drv,
		kubeletplugin.DriverName(dragpu.DriverName),
		kubeletplugin.KubeClient(cs),
		kubeletplugin.NodeName(n.Name),
		kubeletplugin.RegistrarDirectoryPath(kubeletplugin.KubeletRegistryDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
		kubeletplugin.RegistrarListener(listen),
		kubeletplugin.PluginListener(listen),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		cancel()
		t.Fatalf("fake GPU DRA kubelet plugin: %v", err)
	}
	t.Cleanup(func() {
		h.Stop()
		cancel()
		bg := context.Background()
		_ = cs.ResourceV1().ResourceSlices().DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.driver=" + dragpu.DriverName + ",spec.nodeName=" + n.Name})
		_ = cs.ResourceV1().DeviceClasses().Delete(bg, dragpu.ClassName, metav1.DeleteOptions{})
		_ = os.Remove(hostPath(kubeletplugin.KubeletRegistryDir + "/" + dragpu.DriverName + "-reg.sock"))
		_ = os.RemoveAll(hostPath(pluginDir))
	})
	return byName
}

// devicePCIeRoots maps the device names of the ResourceSlices the field
// selector picks to their resource.kubernetes.io/pcieRoot.
func devicePCIeRoots(t *testing.T, fieldSelector string) map[string]string {
	t.Helper()
	var sl resourcev1.ResourceSliceList
	if err := json.Unmarshal([]byte(kubectl(t, "get", "resourceslices", "--field-selector", fieldSelector, "-o", "json")), &sl); err != nil {
		t.Fatal(err)
	}
	roots := map[string]string{}
	for _, s := range sl.Items {
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[dra.AttrPCIeRoot]; ok && a.StringValue != nil {
				roots[d.Name] = *a.StringValue
			}
		}
	}
	return roots
}

// podClaim is the ResourceClaim of the pod's first claim.
func podClaim(t *testing.T, ns, pod string) resourcev1.ResourceClaim {
	t.Helper()
	name := trim(kubectl(t, "-n", ns, "get", "pod", pod, "-o", "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}"))
	var c resourcev1.ResourceClaim
	if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", "resourceclaim", name, "-o", "json")), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// testDRAAligned: the seed's exclusive workload through DRA with its GPU
// from a DRA driver too, one GPU and one VF per pod under one PCIe root
// (a claim with matchAttribute resource.kubernetes.io/pcieRoot): the real
// kube-scheduler picks, for each pod, a GPU under the root of the exclusive
// pool's PF (the fixture has 8 GPUs over three roots, the VFs under one),
// the real kubelet has both drivers prepare, and the pod runs with net1 on
// that VF and both drivers' CDI environment.
func testDRAAligned(t *testing.T) {
	const ns = "dra-aligned"
	gpus := startGPUDriver(t, state.Nodes[0])
	vfRoots := devicePCIeRoots(t, "spec.driver="+dra.DriverName)
	misaligned := 0
	for _, g := range gpus {
		if g.PCIeRoot != vfRoots["vf-0000-41-00-2"] {
			misaligned++
		}
	}
	if misaligned == 0 || misaligned == len(gpus) {
		t.Fatalf("fixture: %d of %d GPUs under another root than the VFs (%s): the test needs both kinds", misaligned, len(gpus), vfRoots["vf-0000-41-00-2"])
	}

	applyExample(t, ns)
	tmpl := `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-nic, namespace: ` + ns + `}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: ` + dragpu.ClassName + `}
        - name: nic
          exactly: {deviceClassName: ` + draClass + `}
      constraints:
        - requests: [gpu, nic]
          matchAttribute: resource.kubernetes.io/pcieRoot
`
	pods := strings.ReplaceAll(draPods(t, ns, "rank-0", "rank-1"), "resourceClaimTemplateName: vf", "resourceClaimTemplateName: gpu-nic")
	if err := k.Apply(ctx(t, time.Minute), tmpl+"\n---\n"+pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range waitRunning(t, ns, "app="+ns, 2, 4*time.Minute) {
		vf, _ := checkExclusive(t, ns, p.Name, nil)
		c := podClaim(t, ns, p.Name)
		var gpu dragpu.GPU
		var nic string
		for _, r := range c.Status.Allocation.Devices.Results {
			switch r.Driver {
			case dragpu.DriverName:
				gpu = gpus[r.Device]
			case dra.DriverName:
				nic = r.Device
			}
		}
		if wantNIC := "vf-" + strings.NewReplacer(":", "-", ".", "-").Replace(vf); nic != wantNIC {
			t.Errorf("%s: claim's NIC %s, net1's VF %s", p.Name, nic, vf)
		}
		if gpu.BDF == "" || gpu.PCIeRoot != vfRoots[nic] {
			t.Errorf("%s: GPU %s (%s, root %s) and NIC %s (root %s) are not under one PCIe root", p.Name, gpu.Name, gpu.BDF, gpu.PCIeRoot, nic, vfRoots[nic])
		}
		env, err := execIn(t, ns, p.Name, "env")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(env, "NVIDIA_VISIBLE_DEVICES="+gpu.BDF+"\n") {
			t.Errorf("%s: env lacks NVIDIA_VISIBLE_DEVICES=%s (the GPU driver's CDI spec):\n%s", p.Name, gpu.BDF, env)
		}
		checkPrepared(t, ns, p.Name, vf)
		t.Logf("%s: GPU %s (%s) and VF %s, both under %s", p.Name, gpu.Name, gpu.BDF, vf, gpu.PCIeRoot)
	}
	kubectl(t, "delete", "ns", ns, "--wait", "--timeout=300s")
}
