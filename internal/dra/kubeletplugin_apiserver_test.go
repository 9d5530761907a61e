package dra

// The kubelet plugin through its real gRPC API: kubelet's registration
// service and the DRA service (k8s.io/kubelet/pkg/apis/dra/v1) served by
// the kubeletplugin helper on unix sockets, reading claims from a real
// kube-apiserver with no more rights than deploy/dra grants.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// createAllocatedClaim creates a claim of one request and stores an
// allocation of devs for it, as the scheduler would.
func createAllocatedClaim(t *testing.T, ctx context.Context, admin kubernetes.Interface, name, class string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	t.Helper()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "training", Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: results[0].Request, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Count: int64(len(results)),
				AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}
	c, err := admin.ResourceV1().ResourceClaims("training").Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	c, err = admin.ResourceV1().ResourceClaims("training").UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("store allocation of claim %s: %v", name, err)
	}
	return c
}

func startPlugin(t *testing.T, ctx context.Context, e *driverEnv, client kubernetes.Interface, paths PluginPaths) (*Driver, func()) {
	t.Helper()
	d := e.driver(t)
	h, err := d.Start(ctx, client, paths)
	if err != nil {
		t.Fatal(err)
	}
	return d, h.Stop
}

func draClient(t *testing.T, socket string) drapb.DRAPluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return drapb.NewDRAPluginClient(conn)
}

func pbClaim(c *resourceapi.ResourceClaim) *drapb.Claim {
	return &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
}

// TestKubeletPluginAPIServer: registration answers as kubelet expects;
// NodePrepareResources prepares claims read from the API server (CDI IDs
// in the answer, CDI spec with the device nodes, PCIDEVICE_ env and the
// NCCL variables the pod the claim is reserved for, read with the shipped
// RBAC, does not set itself; device-info) and refuses a device a device-plugin pod holds, naming the
// pod; after a restart of the plugin (new instance, same state dir)
// NodeUnprepareResources still cleans up.
func TestKubeletPluginAPIServer(t *testing.T) {
	srv := apiserver.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	applyRBAC(t, ctx, admin)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "training"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg := srv.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: publisherSA}
	client := kubernetes.NewForConfigOrDie(cfg)

	vfs := createAllocatedClaim(t, ctx, admin, "two-vfs", "rdma-exclusive.rdmanet.io",
		resourceapi.DeviceRequestAllocationResult{Request: "nics", Driver: DriverName, Pool: testNode, Device: "vf-0000-41-00-2"},
		resourceapi.DeviceRequestAllocationResult{Request: "nics", Driver: DriverName, Pool: testNode, Device: "vf-0000-41-00-3"})
	share := types.UID("5b0c1f5e-7d4a-4d7e-9a55-0a4f3d2f9e11")
	hca := createAllocatedClaim(t, ctx, admin, "shared-hca", "rdma-shared.rdmanet.io",
		resourceapi.DeviceRequestAllocationResult{Request: "rdma", Driver: DriverName, Pool: testNode, Device: "hca-0000-81-00-0",
			ShareID: &share, ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{CapacitySlots: resource.MustParse("1")}})
	// the pod two-vfs is reserved for: its container sets NCCL_IB_HCA
	trainer, err := admin.CoreV1().Pods("training").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "rails", ResourceClaimName: &vfs.Name}},
			Containers: []corev1.Container{{Name: "main", Image: "trainer", Env: []corev1.EnvVar{{Name: EnvNCCLIBHCA, Value: "=mlx5_4:1"}},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "rails"}}}}}}}, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	vfs.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: trainer.Name, UID: trainer.UID}}
	if vfs, err = admin.ResourceV1().ResourceClaims("training").UpdateStatus(ctx, vfs, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("reserve claim %s: %v", vfs.Name, err)
	}
	busy := createAllocatedClaim(t, ctx, admin, "busy-vf", "rdma-exclusive.rdmanet.io",
		resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: DriverName, Pool: testNode, Device: "vf-0000-41-00-4"})

	// kubelet's directories; short paths, for unix socket names
	base, err := os.MkdirTemp("", "rdra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	paths := PluginPaths{RegistrarDir: filepath.Join(base, "reg"), PluginDir: filepath.Join(base, "p")}
	e := newDriverEnv(t)
	e.pods = nil // the API server's, through the client given to Start
	e.dp.holders = []DPHolder{{Resource: "example.com/sriov_rdma", DeviceID: "0000:41:00.4", Pod: "default/dp-trainer"}}
	_, stop := startPlugin(t, ctx, e, client, paths)

	// registration, as kubelet's plugin watcher sees it
	conn, err := grpc.NewClient("unix://"+filepath.Join(paths.RegistrarDir, DriverName+"-reg.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != DriverName || info.Endpoint != filepath.Join(paths.PluginDir, "dra.sock") || !slices.Contains(info.SupportedVersions, drapb.DRAPluginService) {
		t.Errorf("GetInfo: %+v", info)
	}

	dra := draClient(t, info.Endpoint)
	resp, err := dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{pbClaim(vfs), pbClaim(hca), pbClaim(busy)}})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	for _, c := range []*resourceapi.ResourceClaim{vfs, hca} {
		r := resp.Claims[string(c.UID)]
		if r == nil || r.Error != "" {
			t.Fatalf("claim %s: %+v", c.Name, r)
		}
		for _, d := range r.Devices {
			want := CDIKind + "=" + string(c.UID) + "-" + d.DeviceName
			if d.PoolName != testNode || !slices.Equal(d.CdiDeviceIds, []string{want}) {
				t.Errorf("claim %s device %+v: want pool %s, CDI ID %s", c.Name, d, testNode, want)
			}
		}
	}
	if r := resp.Claims[string(hca.UID)]; len(r.Devices) != 1 || r.Devices[0].ShareId == nil || *r.Devices[0].ShareId != string(share) {
		t.Errorf("shared claim: devices %+v, want one with share ID %s", r.Devices, share)
	}
	if r := resp.Claims[string(busy.UID)]; r == nil || !strings.Contains(r.Error, "pod default/dp-trainer holds it through the device plugin") || !strings.Contains(r.Error, "vf-0000-41-00-4") {
		t.Errorf("claim on a device-plugin VF: %+v, want a refusal naming the device and the pod", r)
	}

	spec := specView(readSpec(t, e.cdi, string(vfs.UID)))
	wantNodes := []string{"/dev/infiniband/issm4", "/dev/infiniband/issm5", rdmaCM, "/dev/infiniband/umad4", "/dev/infiniband/umad5", "/dev/infiniband/uverbs4", "/dev/infiniband/uverbs5"}
	slices.Sort(wantNodes)
	if !slices.Equal(spec.nodes, wantNodes) || !slices.Equal(spec.env, []string{EnvNCCLIBGIDIndex + "=3", "PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=0000:41:00.2,0000:41:00.3"}) {
		t.Errorf("CDI spec of %s: nodes %v env %v", vfs.Name, spec.nodes, spec.env)
	}
	if info, _ := devinfo.Read(e.devInfo, "example.com/sriov_rdma", "0000:41:00.3"); info == nil || info.Pci.PfPciAddress != "0000:41:00.0" || info.Pci.RdmaDevice != "mlx5_5" {
		t.Errorf("device-info of 0000:41:00.3: %+v", info)
	}

	// restart: a new instance over the same state dir unprepares
	stop()
	e.claimed = NewClaimed()
	_, stop = startPlugin(t, ctx, e, client, paths)
	defer stop()
	dra = draClient(t, filepath.Join(paths.PluginDir, "dra.sock"))
	uresp, err := dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{pbClaim(vfs), pbClaim(hca), pbClaim(busy)}})
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	for _, c := range []*resourceapi.ResourceClaim{vfs, hca, busy} {
		if r := uresp.Claims[string(c.UID)]; r == nil || r.Error != "" {
			t.Errorf("unprepare %s: %+v", c.Name, r)
		}
		if _, err := os.Stat(cdiSpecPath(e.cdi, c.UID)); err == nil {
			t.Errorf("CDI spec of %s left after unprepare", c.Name)
		}
	}
	if info, _ := devinfo.Read(e.devInfo, "example.com/sriov_rdma", "0000:41:00.3"); info != nil {
		t.Error("device-info left after unprepare")
	}
	if h := e.claimed.Holder("0000:41:00.2") + e.claimed.Holder("0000:81:00.0"); h != "" {
		t.Errorf("still held after unprepare: %s", h)
	}
}
