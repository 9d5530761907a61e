package dra

// Tests against a real kube-apiserver + etcd (test/apiserver; without the
// binaries they skip, with CI=true they fail): the publisher's
// ResourceSlices as the server stores them, following the fixture node's
// changes, published with no more rights than deploy/dra grants; and the
// DeviceClasses of deploy/dra accepted by the server and selecting the
// devices they are meant to.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/cel"
	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/deviceplugin/config"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

const testNode = "gpu-node-1"

// TestMain stops the API server the tests share (apiserver.Shared).
func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.StopShared()
	os.Exit(code)
}

// publisherSA is the identity deploy/dra/rbac-dra.yaml grants.
const publisherSA = "system:serviceaccount:rdmanet-system:rdmanet-daemon"

func draDir(t *testing.T) string {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy", "dra")
}

// draKustomization returns the files deploy/dra/kustomization.yaml lists,
// after checking it lists every manifest in the directory.
func draKustomization(t *testing.T) []string {
	t.Helper()
	dir := draDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil || k.Kind != "Kustomization" {
		t.Fatalf("deploy/dra/kustomization.yaml: %v (kind %q)", err, k.Kind)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var onDisk []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			onDisk = append(onDisk, filepath.Base(f))
		}
	}
	listed := slices.Clone(k.Resources)
	sort.Strings(listed)
	if !slices.Equal(listed, onDisk) {
		t.Fatalf("deploy/dra/kustomization.yaml lists %v, the directory has %v", listed, onDisk)
	}
	return k.Resources
}

// yamlDocs returns the YAML documents of the file at path that hold more
// than comments.
func yamlDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if err != nil {
			return out
		}
		if strings.TrimSpace(stripComments(string(doc))) != "" {
			out = append(out, doc)
		}
	}
}

// decodeAll decodes every YAML document of deploy/dra/<file> strictly into T.
func decodeAll[T any](t *testing.T, file string) []T {
	t.Helper()
	var out []T
	for _, doc := range yamlDocs(t, filepath.Join(draDir(t), file)) {
		var v T
		if err := yaml.UnmarshalStrict(doc, &v); err != nil {
			t.Fatalf("deploy/dra/%s: %v", file, err)
		}
		out = append(out, v)
	}
	return out
}

func stripComments(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// applyRBAC creates deploy/dra/rbac-dra.yaml's objects.
func applyRBAC(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	if err := apiserver.ApplyRBACFile(ctx, admin, "deploy/dra/rbac-dra.yaml"); err != nil {
		t.Fatal(err)
	}
}

// nodeState discovers the fixture node and builds the pools, as the agent does.
func nodeState(t *testing.T, root, netns, cfg string) (*inventory.Node, []*deviceplugin.Pool) {
	t.Helper()
	specs, err := config.Parse("pools.json", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root, DefaultRouteLinks: []string{"eno1"}, NetnsModeFlag: netns})
	if err != nil {
		t.Fatal(err)
	}
	pools, err := deviceplugin.Build(node, specs)
	if err != nil {
		t.Fatal(err)
	}
	return node, pools
}

// published is the server's view: the node's slices of the driver.
type published struct {
	slices  []resourceapi.ResourceSlice
	devices map[string]resourceapi.Device
}

func listPublished(ctx context.Context, c kubernetes.Interface) (published, error) {
	l, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + testNode + ",spec.driver=" + DriverName})
	if err != nil {
		return published{}, err
	}
	p := published{slices: l.Items, devices: map[string]resourceapi.Device{}}
	for _, s := range l.Items {
		for _, d := range s.Spec.Devices {
			p.devices[d.Name] = d
		}
	}
	return p, nil
}

// waitPublished polls the server until check passes (nil) or a minute ends.
func waitPublished(t *testing.T, ctx context.Context, c kubernetes.Interface, what string, check func(published) error) published {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		p, err := listPublished(ctx, c)
		if err == nil {
			if last = check(p); last == nil {
				return p
			}
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: ResourceSlices did not get there in a minute: %v", what, last)
	return published{}
}

func deviceSet(want ...string) func(published) error {
	return func(p published) error {
		var got []string
		for n := range p.devices {
			got = append(got, n)
		}
		sort.Strings(got)
		w := slices.Clone(want)
		sort.Strings(w)
		if !slices.Equal(got, w) {
			return fmt.Errorf("devices %v, want %v", got, w)
		}
		return nil
	}
}

func taintedSet(p published) []string { return taintedBy(p, TaintUnhealthy) }

// taintedBy lists the devices with the NoSchedule taint key, sorted.
func taintedBy(p published, key string) []string {
	var out []string
	for n, d := range p.devices {
		for _, tn := range d.Taints {
			if tn.Key == key && tn.Effect == resourceapi.DeviceTaintEffectNoSchedule && tn.TimeAdded != nil {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestPublisherAPIServer: the publisher, with only deploy/dra's RBAC,
// publishes the fixture node's devices as ResourceSlices a real API server
// accepts and stores whole (standard pcieRoot and numaNode, Multus'
// deviceID, the shared device's consumable capacity); then the slices
// follow the node: a VF vanishing and an RDMA port going down (taint), the
// port coming back and the VF reappearing.
func TestPublisherAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyRBAC(t, ctx, admin)
	cfg := srv.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: publisherSA}
	client := kubernetes.NewForConfigOrDie(cfg)

	s := fixture(t)
	holders := &fakeHolders{}
	pub, err := NewPublisher(PublisherOptions{Client: client, NodeName: testNode, SysfsRoot: s.Root, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		InUse: holders, InUsePoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pub.Start(ctx)
	defer pub.Stop()
	update := func() {
		t.Helper()
		node, pools := nodeState(t, s.Root, "", cfgAll)
		if err := pub.Update(node, pools); err != nil {
			t.Fatal(err)
		}
	}

	update()
	all := []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5", "vf-0000-c1-00-2", "vf-0000-c1-00-3", "hca-0000-81-00-0"}
	p := waitPublished(t, ctx, admin, "first publication", deviceSet(all...))
	if len(p.slices) != 1 {
		t.Fatalf("%d slices, want 1", len(p.slices))
	}
	sl := p.slices[0]
	if sl.Spec.Pool.Name != testNode || sl.Spec.Pool.ResourceSliceCount != 1 || sl.Spec.NodeName == nil || *sl.Spec.NodeName != testNode {
		t.Errorf("slice pool %+v nodeName %v: want pool %s of one slice on node %s", sl.Spec.Pool, sl.Spec.NodeName, testNode, testNode)
	}
	if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].Kind != "Node" || sl.OwnerReferences[0].Name != testNode {
		t.Errorf("slice owners %+v: want the Node (the slices go when the node goes)", sl.OwnerReferences)
	}
	want := map[string]map[string]string{
		"vf-0000-41-00-2": {
			"resource.kubernetes.io/pcieRoot": "pci0000:40", "resource.kubernetes.io/numaNode": "0",
			"k8s.cni.cncf.io/deviceID": "0000:41:00.2", "k8s.cni.cncf.io/resourceName": "example.com/sriov_rdma",
			"kind": "exclusive", "linkLayer": "ethernet", "vfIndex": "0", "pfName": "enp65s0f0np0", "rdmaDevice": "mlx5_4", "firmware": "22.39.1002",
		},
		"vf-0000-c1-00-3": {
			"resource.kubernetes.io/pcieRoot": "pci0000:c0", "resource.kubernetes.io/numaNode": "1",
			"k8s.cni.cncf.io/deviceID": "0000:c1:00.3", "linkLayer": "infiniband", "vfIndex": "1",
		},
		"hca-0000-81-00-0": {
			"resource.kubernetes.io/pcieRoot": "pci0000:80", "resource.kubernetes.io/numaNode": "1",
			"k8s.cni.cncf.io/deviceID": "0000:81:00.0", "k8s.cni.cncf.io/resourceName": "rdma/rdma_shared_device_eth", "kind": "shared",
		},
	}
	for dev, w := range want {
		got := attrs(p.devices[dev])
		for k, v := range w {
			if got[k] != v {
				t.Errorf("stored %s: attribute %s = %q, want %q", dev, k, got[k], v)
			}
		}
	}
	hca := p.devices["hca-0000-81-00-0"]
	slots := hca.Capacity[CapacitySlots]
	if hca.AllowMultipleAllocations == nil || !*hca.AllowMultipleAllocations || slots.Value.Value() != 63 || slots.RequestPolicy == nil {
		t.Errorf("stored shared device: allowMultipleAllocations %v capacity %+v: the server dropped consumable capacity (DRAConsumableCapacity off?)", hca.AllowMultipleAllocations, hca.Capacity)
	}
	if tn := taintedSet(p); len(tn) != 0 {
		t.Errorf("tainted %v on a healthy node", tn)
	}

	// A VF vanishes (sriov_numvfs 4 -> 3) and another VF's RDMA port goes down.
	if err := s.SetNumVFs(s.RoCE, 4, 3); err != nil {
		t.Fatal(err)
	}
	downIB := s.RDMAByBD[sysfsfixture.VFBDF(s.RoCE.BDF, 1)]
	if err := s.SetPortState(downIB, "1: DOWN"); err != nil {
		t.Fatal(err)
	}
	update()
	p = waitPublished(t, ctx, admin, "VF 3 gone, VF 1 port down", func(p published) error {
		if err := deviceSet(slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == "vf-0000-41-00-5" })...)(p); err != nil {
			return err
		}
		if tn := taintedSet(p); !slices.Equal(tn, []string{"vf-0000-41-00-3"}) {
			return fmt.Errorf("tainted %v, want [vf-0000-41-00-3]", tn)
		}
		return nil
	})

	// The port comes back, the VF too.
	if err := s.SetPortState(downIB, "4: ACTIVE"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNumVFs(s.RoCE, 3, 4); err != nil {
		t.Fatal(err)
	}
	update()
	waitPublished(t, ctx, admin, "healthy again, VF 3 back", func(p published) error {
		if err := deviceSet(all...)(p); err != nil {
			return err
		}
		if tn := taintedSet(p); len(tn) != 0 {
			return fmt.Errorf("tainted %v, want none", tn)
		}
		return nil
	})

	// A pod takes a VF through the device plugin and another a slot of the
	// shared pool: both devices are tainted for the scheduler, and untainted
	// when the pods are gone. No Update: the publisher asks kubelet itself.
	holders.set(DPHolder{Resource: "example.com/sriov_rdma", DeviceID: "0000:41:00.4", Pod: "ai/a"},
		DPHolder{Resource: "rdma/rdma_shared_device_eth", DeviceID: "slot-7", Pod: "ai/b"},
		DPHolder{Resource: "nvidia.com/gpu", DeviceID: "0000:41:00.2", Pod: "ai/a"})
	waitPublished(t, ctx, admin, "VF and HCA held through the device plugin", func(p published) error {
		if tn := taintedBy(p, TaintDevicePlugin); !slices.Equal(tn, []string{"hca-0000-81-00-0", "vf-0000-41-00-4"}) {
			return fmt.Errorf("tainted %s %v, want [hca-0000-81-00-0 vf-0000-41-00-4]", TaintDevicePlugin, tn)
		}
		return nil
	})
	holders.set()
	waitPublished(t, ctx, admin, "device plugin pods gone", func(p published) error {
		if tn := taintedBy(p, TaintDevicePlugin); len(tn) != 0 {
			return fmt.Errorf("tainted %s %v, want none", TaintDevicePlugin, tn)
		}
		return nil
	})

	// A node without devices to publish (its only pool is exclusive, the
	// RDMA subsystem is in shared mode: not advertised) keeps one empty
	// slice: the driver runs and has no devices.
	node, pools := nodeState(t, s.Root, "shared", cfgExclusive)
	if err := pub.Update(node, pools); err != nil {
		t.Fatal(err)
	}
	p = waitPublished(t, ctx, admin, "no devices", deviceSet())
	if len(p.slices) != 1 {
		t.Fatalf("no devices: %d slices, want one empty slice", len(p.slices))
	}
}

// TestDeviceClassesAPIServer: the DeviceClasses of deploy/dra are created
// by a real API server with strict field validation (their CEL compiles
// there; extendedResourceName is kept, not dropped), and each class's
// selectors, evaluated with the scheduler's CEL library, select exactly
// the devices of its kind or pool.
func TestDeviceClassesAPIServer(t *testing.T) {
	files := draKustomization(t)
	if !slices.Contains(files, "deviceclasses.yaml") || !slices.Contains(files, "rbac-dra.yaml") {
		t.Fatalf("deploy/dra lists %v, want deviceclasses.yaml and rbac-dra.yaml", files)
	}
	classes := decodeAll[resourceapi.DeviceClass](t, "deviceclasses.yaml")
	s := fixture(t)
	devs := build(t, s.Root, "", cfgAll)
	vfs := []string{"vf-0000-41-00-2", "vf-0000-41-00-3", "vf-0000-41-00-4", "vf-0000-41-00-5", "vf-0000-c1-00-2", "vf-0000-c1-00-3"}
	want := map[string]struct {
		extended string
		selects  []string
	}{
		"rdma-exclusive.rdmanet.io":   {"", vfs},
		"rdma-shared.rdmanet.io":      {"", []string{"hca-0000-81-00-0"}},
		"sriov-rdma.example.com":      {"example.com/sriov_rdma", vfs[:4]},
		"rdma-shared-device-eth.rdma": {"rdma/rdma_shared_device_eth", []string{"hca-0000-81-00-0"}},
	}
	if len(classes) != len(want) {
		t.Fatalf("deploy/dra/deviceclasses.yaml has %d classes, want %d", len(classes), len(want))
	}
	compiler := cel.GetCompiler(cel.Features{EnableConsumableCapacity: true})
	for _, dc := range classes {
		w, ok := want[dc.Name]
		if !ok {
			t.Fatalf("unexpected DeviceClass %s", dc.Name)
		}
		if got := ptrString(dc.Spec.ExtendedResourceName); got != w.extended {
			t.Errorf("%s: extendedResourceName %q, want %q", dc.Name, got, w.extended)
		}
		var selected []string
		for _, d := range devs {
			all := true
			for _, sel := range dc.Spec.Selectors {
				res := compiler.CompileCELExpression(sel.CEL.Expression, cel.Options{})
				if res.Error != nil {
					t.Fatalf("%s: CEL %q: %v", dc.Name, sel.CEL.Expression, res.Error)
				}
				ok, _, err := res.DeviceMatches(context.Background(), cel.Device{Driver: DriverName, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
				if err != nil {
					t.Fatalf("%s on %s: %v", dc.Name, d.Name, err)
				}
				all = all && ok
			}
			if all {
				selected = append(selected, d.Name)
			}
		}
		if !slices.Equal(selected, w.selects) {
			t.Errorf("%s selects %v, want %v", dc.Name, selected, w.selects)
		}
	}

	srv := apiserver.Shared(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	for _, dc := range classes {
		got, err := admin.ResourceV1().DeviceClasses().Create(ctx, &dc, metav1.CreateOptions{FieldValidation: "Strict"})
		if err != nil {
			t.Fatalf("create DeviceClass %s: %v", dc.Name, err)
		}
		if ptrString(got.Spec.ExtendedResourceName) != ptrString(dc.Spec.ExtendedResourceName) {
			t.Errorf("DeviceClass %s stored with extendedResourceName %q, sent %q (DRAExtendedResource off?)", dc.Name, ptrString(got.Spec.ExtendedResourceName), ptrString(dc.Spec.ExtendedResourceName))
		}
	}
	applyRBAC(t, ctx, admin)
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// fakeHolders is kubelet's PodResources as the publisher sees it.
type fakeHolders struct {
	mu sync.Mutex
	hs []DPHolder
}

func (f *fakeHolders) set(hs ...DPHolder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hs = hs
}

func (f *fakeHolders) DevicePluginHolders(context.Context) ([]DPHolder, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hs), nil
}
