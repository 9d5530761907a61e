package dra

// Unit tests of the DRA kubelet plugin (Driver) over the standard sysfs
// fixture: what Prepare gives a container equals what the device plugin's
// Allocate gives for the same devices; the refusals of the overlap rule;
// rollback; the checkpoint across a restart; Unprepare's idempotence.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/rdmanet/rdmanet/internal/deviceplugin"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// fakeDP is the device plugin's side as PodResources would list it.
type fakeDP struct {
	holders []DPHolder
	err     error
}

func (f *fakeDP) DevicePluginHolders(context.Context) ([]DPHolder, error) { return f.holders, f.err }

// driverEnv is one node's plugin: its fixture, dirs and device plugin side.
type driverEnv struct {
	s                   *sysfsfixture.Standard
	state, cdi, devInfo string
	dp                  *fakeDP
	claimed             *Claimed
	pods                *fakePods
}

func newDriverEnv(t *testing.T) *driverEnv {
	t.Helper()
	dir := t.TempDir()
	return &driverEnv{s: fixture(t), state: filepath.Join(dir, "state"), cdi: filepath.Join(dir, "cdi"),
		devInfo: filepath.Join(dir, "devinfo"), dp: &fakeDP{}, claimed: NewClaimed(), pods: &fakePods{}}
}

// driver starts a plugin instance (as an agent start does: load the
// checkpoint, then take the first discovery), with the NCCL environment
// on (the agent's default).
func (e *driverEnv) driver(t *testing.T) *Driver {
	t.Helper()
	d, err := NewDriver(DriverOptions{NodeName: testNode, CDIDir: e.cdi, StateDir: e.state, DevInfoDir: e.devInfo,
		Claimed: e.claimed, DevicePlugin: e.dp, NCCLEnv: true, Pods: e.podGetter(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.rescan(t, d)
	return d
}

// podGetter is e.pods; nil (the API client given to Start) without.
func (e *driverEnv) podGetter() PodGetter {
	if e.pods == nil {
		return nil
	}
	return e.pods
}

func (e *driverEnv) rescan(t *testing.T, d *Driver) {
	t.Helper()
	node, pools := nodeState(t, e.s.Root, "", cfgAll)
	d.Update(node, pools)
}

type alloc struct{ request, device string }

func newClaim(uid, name string, devs ...alloc) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "training", Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, a := range devs {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: a.request, Driver: DriverName, Pool: testNode, Device: a.device})
	}
	return c
}

func prepare(t *testing.T, d *Driver, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if err != nil {
		t.Fatalf("PrepareResourceClaims: %v", err)
	}
	r, ok := res[c.UID]
	if !ok || len(res) != 1 {
		t.Fatalf("PrepareResourceClaims: result %v has no single entry for %s", res, c.UID)
	}
	return r
}

func unprepare(t *testing.T, d *Driver, uid string) error {
	t.Helper()
	res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID(uid), NamespacedName: types.NamespacedName{Namespace: "training", Name: "c"}}})
	if err != nil {
		t.Fatalf("UnprepareResourceClaims: %v", err)
	}
	if _, ok := res[types.UID(uid)]; !ok {
		t.Fatalf("UnprepareResourceClaims: no entry for %s", uid)
	}
	return res[types.UID(uid)]
}

func readSpec(t *testing.T, dir, uid string) *cdispec.Spec {
	t.Helper()
	b, err := os.ReadFile(cdiSpecPath(dir, types.UID(uid)))
	if err != nil {
		t.Fatal(err)
	}
	var s cdispec.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("CDI spec: %v", err)
	}
	if err := cdispec.ValidateVersion(&s); err != nil {
		t.Errorf("CDI spec version: %v", err)
	}
	return &s
}

// containerView is what a container gets: device nodes and environment.
type containerView struct {
	nodes []string
	env   []string
}

func specView(s *cdispec.Spec) containerView {
	var v containerView
	for _, d := range s.Devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			if n.HostPath != n.Path || n.Permissions != "rw" {
				v.nodes = append(v.nodes, "bad:"+n.Path+"<-"+n.HostPath+":"+n.Permissions)
				continue
			}
			if !slices.Contains(v.nodes, n.Path) {
				v.nodes = append(v.nodes, n.Path)
			}
		}
		v.env = append(v.env, d.ContainerEdits.Env...)
	}
	sort.Strings(v.nodes)
	sort.Strings(v.env)
	return v
}

func allocateView(car *pluginapi.ContainerAllocateResponse) containerView {
	var v containerView
	for _, d := range car.Devices {
		if d.HostPath != d.ContainerPath || d.Permissions != "rw" {
			v.nodes = append(v.nodes, "bad:"+d.ContainerPath)
			continue
		}
		v.nodes = append(v.nodes, d.ContainerPath)
	}
	for k, val := range car.Envs {
		v.env = append(v.env, k+"="+val)
	}
	sort.Strings(v.nodes)
	sort.Strings(v.env)
	return v
}

// TestPrepareMirrorsDevicePlugin: a prepared claim's CDI spec gives the
// container exactly the device nodes and environment the device plugin's
// Allocate gives for the same devices, and the same device-info files;
// besides, and only besides, the NCCL variables (DRA-only extras,
// TestPrepareNCCLEnv).
func TestPrepareMirrorsDevicePlugin(t *testing.T) {
	tests := []struct {
		name     string
		devs     []alloc
		resource string
		dpIDs    []string // the device plugin's IDs for the same hardware
		wantEnv  []string
	}{
		{name: "one RoCE VF", devs: []alloc{{"nic", "vf-0000-41-00-2"}}, resource: "example.com/sriov_rdma",
			dpIDs: []string{"0000:41:00.2"}, wantEnv: []string{"PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=0000:41:00.2"}},
		{name: "two VFs in one request", devs: []alloc{{"nics", "vf-0000-41-00-2"}, {"nics", "vf-0000-41-00-4"}}, resource: "example.com/sriov_rdma",
			dpIDs: []string{"0000:41:00.2", "0000:41:00.4"}, wantEnv: []string{"PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=0000:41:00.2,0000:41:00.4"}},
		{name: "InfiniBand VF", devs: []alloc{{"ib", "vf-0000-c1-00-3"}}, resource: "example.com/sriov_ib",
			dpIDs: []string{"0000:c1:00.3"}, wantEnv: []string{"PCIDEVICE_EXAMPLE_COM_SRIOV_IB=0000:c1:00.3"}},
		{name: "shared HCA", devs: []alloc{{"rdma", "hca-0000-81-00-0"}}, resource: "rdma/rdma_shared_device_eth",
			dpIDs: []string{"rdma-shared-device-eth-007"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDriverEnv(t)
			d := e.driver(t)
			const uid = "0c1a1m00-0000-4000-8000-000000000001"
			r := prepare(t, d, newClaim(uid, "c", tc.devs...))
			if r.Err != nil {
				t.Fatalf("Prepare: %v", r.Err)
			}
			if len(r.Devices) != len(tc.devs) {
				t.Fatalf("Prepare: %d devices, want %d", len(r.Devices), len(tc.devs))
			}
			for i, dev := range r.Devices {
				want := CDIKind + "=" + uid + "-" + tc.devs[i].device
				if dev.PoolName != testNode || dev.DeviceName != tc.devs[i].device || !slices.Equal(dev.Requests, []string{tc.devs[i].request}) || !slices.Equal(dev.CDIDeviceIDs, []string{want}) {
					t.Errorf("device %d: %+v, want pool %s device %s request %s CDI %s", i, dev, testNode, tc.devs[i].device, tc.devs[i].request, want)
				}
			}
			spec := readSpec(t, e.cdi, uid)
			if spec.Kind != CDIKind || len(spec.Devices) != len(tc.devs) {
				t.Fatalf("CDI spec kind %q with %d devices, want %s with %d", spec.Kind, len(spec.Devices), CDIKind, len(tc.devs))
			}
			for i, sd := range spec.Devices {
				if sd.Name != uid+"-"+tc.devs[i].device {
					t.Errorf("CDI device %d named %q", i, sd.Name)
				}
			}
			got := specView(spec)
			var nccl []string
			got.env = slices.DeleteFunc(got.env, func(v string) bool {
				if strings.HasPrefix(v, EnvNCCLIBHCA+"=") || strings.HasPrefix(v, EnvNCCLIBGIDIndex+"=") {
					nccl = append(nccl, v)
					return true
				}
				return false
			})
			if len(nccl) == 0 {
				t.Errorf("CDI env without NCCL variables: the comparison below would not show that they are the only extras")
			}
			if !slices.Equal(got.env, tc.wantEnv) {
				t.Errorf("CDI env %v, want %v", got.env, tc.wantEnv)
			}

			// the device plugin, same node, same devices
			node, pools := nodeState(t, e.s.Root, "", cfgAll)
			var pool *deviceplugin.Pool
			for _, p := range pools {
				if p.Resource == tc.resource {
					pool = p
				}
			}
			dpInfo := t.TempDir()
			srv := deviceplugin.NewServer(pool, deviceplugin.ServerOptions{PluginDir: t.TempDir(), DevInfoDir: dpInfo, RDMACM: node.RDMACM})
			resp, err := srv.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.dpIDs}}})
			if err != nil {
				t.Fatal(err)
			}
			want := allocateView(resp.ContainerResponses[0])
			if !slices.Equal(got.nodes, want.nodes) || !slices.Equal(got.env, want.env) {
				t.Errorf("CDI gives nodes %v env %v;\nthe device plugin gives nodes %v env %v", got.nodes, got.env, want.nodes, want.env)
			}
			if len(got.nodes) == 0 || !slices.Contains(got.nodes, rdmaCM) {
				t.Errorf("no RDMA device nodes (or no rdma_cm) in %v", got.nodes)
			}
			for _, id := range tc.dpIDs {
				dpFile, _ := devinfo.Read(dpInfo, tc.resource, id)
				ours, err := devinfo.Read(e.devInfo, tc.resource, id)
				if err != nil {
					t.Fatal(err)
				}
				if dpFile == nil {
					if ours != nil {
						t.Errorf("device-info for %s written, the device plugin writes none", id)
					}
					continue
				}
				a, _ := json.Marshal(dpFile)
				b, _ := json.Marshal(ours)
				if string(a) != string(b) {
					t.Errorf("device-info for %s: %s, the device plugin writes %s", id, b, a)
				}
			}

			// checkpoint: root-only, records the claim
			fi, err := os.Stat(filepath.Join(e.state, CheckpointFile))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("checkpoint: %v mode %v, want 0600", err, fi)
			}
			// again: idempotent, same answer
			if r2 := prepare(t, d, newClaim(uid, "c", tc.devs...)); r2.Err != nil || len(r2.Devices) != len(r.Devices) || r2.Devices[0].CDIDeviceIDs[0] != r.Devices[0].CDIDeviceIDs[0] {
				t.Errorf("second Prepare: %+v, want %+v", r2, r)
			}
		})
	}
}

// TestPrepareRefuses: the overlap rule and the other refusals; a refused
// claim leaves nothing behind (no CDI spec, device-info, checkpoint entry
// or hold) and its error names the device, the holder and the fix.
func TestPrepareRefuses(t *testing.T) {
	const vf, vfPCI = "vf-0000-41-00-2", "0000:41:00.2"
	tests := []struct {
		name  string
		setup func(t *testing.T, e *driverEnv, d *Driver)
		devs  []alloc
		want  []string // substrings of the error
		// reservedFor: the claim is reserved for this pod (of namespace training)
		reservedFor string
		// otherInfo: another claim's device-info file for the device must stay
		otherInfo bool
	}{
		{name: "VF held by a pod through the device plugin",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				e.dp.holders = []DPHolder{{Resource: "example.com/sriov_rdma", DeviceID: vfPCI, Pod: "default/trainer-0"}}
			},
			devs: []alloc{{"nic", "vf-0000-41-00-3"}, {"nic", vf}},
			want: []string{vf, vfPCI, "pod default/trainer-0 holds it through the device plugin", "fix: delete pod default/trainer-0"}},
		{name: "shared HCA with a device-plugin slot in use",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				e.dp.holders = []DPHolder{{Resource: "rdma/rdma_shared_device_eth", DeviceID: "rdma-shared-device-eth-003", Pod: "default/bench"}}
			},
			devs: []alloc{{"rdma", "hca-0000-81-00-0"}},
			want: []string{"hca-0000-81-00-0", "pod default/bench holds slot rdma-shared-device-eth-003", "fix:"}},
		{name: "VF just allocated by the device plugin",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				e.claimed.Allocated("example.com/sriov_rdma", []string{vfPCI})
			},
			devs: []alloc{{"nic", vf}},
			want: []string{vf, "handed out by the device plugin (resource example.com/sriov_rdma)", "fix:"}},
		{name: "VF prepared for another claim",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				if r := prepare(t, d, newClaim("other-uid", "first", alloc{"nic", vf})); r.Err != nil {
					t.Fatal(r.Err)
				}
			},
			devs: []alloc{{"nic", vf}}, otherInfo: true,
			want: []string{vf, "already prepared for DRA claim training/first (other-uid)", "fix:"}},
		{name: "VF whose RDMA device is in a pod's netns",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				if err := e.s.RemoveRDMA(vfPCI); err != nil {
					t.Fatal(err)
				}
				e.rescan(t, d)
			},
			devs: []alloc{{"nic", vf}},
			want: []string{vf, "is in use: its RDMA device is not in the host's network namespace", "fix:"}},
		{name: "VF with its RDMA port down",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				if err := e.s.SetPortState("mlx5_4", "DOWN"); err != nil {
					t.Fatal(err)
				}
				e.rescan(t, d)
			},
			devs: []alloc{{"nic", vf}},
			want: []string{vf, "unhealthy: RDMA port mlx5_4/1 is DOWN", "fix:"}},
		{name: "device not on the node",
			devs: []alloc{{"nic", "vf-0000-41-00-9"}},
			want: []string{"vf-0000-41-00-9 is not on node " + testNode, "fix:"}},
		{name: "kubelet's PodResources unreachable",
			setup: func(t *testing.T, e *driverEnv, d *Driver) { e.dp.err = errors.New("connection refused") },
			devs:  []alloc{{"nic", vf}},
			want:  []string{vf, "cannot tell whether the device plugin handed it out: connection refused"}},
		{name: "pod the claim is reserved for unreadable (NCCL env fails closed)",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				e.pods.err = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "trainer-0", errors.New("RBAC: no rule"))
			},
			devs: []alloc{{"nic", vf}}, reservedFor: "trainer-0",
			want: []string{"claim training/c: cannot read pod training/trainer-0", "forbidden", "fix: grant the agent's identity get on pods", "--dra-nccl-env=false"}},
		{name: "CDI dir not writable (rollback)",
			setup: func(t *testing.T, e *driverEnv, d *Driver) {
				if err := os.WriteFile(e.cdi, nil, 0o600); err != nil { // a file where the dir should be
					t.Fatal(err)
				}
			},
			devs: []alloc{{"nic", vf}},
			want: []string{"CDI spec of claim training/c", "fix: the CDI dir"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDriverEnv(t)
			d := e.driver(t)
			if tc.setup != nil {
				tc.setup(t, e, d)
			}
			const uid = "refused-uid"
			c := newClaim(uid, "c", tc.devs...)
			if tc.reservedFor != "" {
				reserve(c, e.pods.add(podUsing(tc.reservedFor, ctr("main", []string{"c"}))))
			}
			r := prepare(t, d, c)
			if r.Err == nil {
				t.Fatalf("Prepare succeeded: %+v", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", r.Err, w)
				}
			}
			if _, err := os.Stat(cdiSpecPath(e.cdi, uid)); err == nil {
				t.Error("a refused claim left its CDI spec")
			}
			for _, a := range tc.devs {
				pci := strings.NewReplacer("vf-0000-", "0000:", "hca-0000-", "0000:").Replace(a.device)
				pci = pci[:7] + ":" + pci[8:10] + "." + pci[11:]
				if info, _ := devinfo.Read(e.devInfo, "example.com/sriov_rdma", pci); (info != nil) != tc.otherInfo {
					t.Errorf("device-info of %s present: %v, want %v (a refused claim writes none and removes no other claim's)", pci, info != nil, tc.otherInfo)
				}
				if h := e.claimed.Holder(pci); strings.Contains(h, uid) {
					t.Errorf("a refused claim still holds %s: %s", pci, h)
				}
			}
			if slices.Contains(d.Prepared(), types.UID(uid)) {
				t.Error("a refused claim is in the checkpoint")
			}
		})
	}
}

// TestCheckpointRestart: prepared claims survive a restart of the plugin
// (a new Driver over the same state dir): they hold their devices before
// the first discovery, Prepare answers from the checkpoint even when the
// device is no longer visible on the host (its RDMA device went into the
// pod), and Unprepare cleans up; Unprepare is idempotent.
func TestCheckpointRestart(t *testing.T) {
	e := newDriverEnv(t)
	d := e.driver(t)
	// the pod's container uses this claim and vf2, prepared after the restart
	pod := e.pods.add(podUsing("trainer", ctr("main", []string{"vf", "vf2"})))
	vfClaim := reserve(newClaim("uid-vf", "vf", alloc{"nic", "vf-0000-41-00-2"}), pod)
	hcaClaim := newClaim("uid-hca", "hca", alloc{"rdma", "hca-0000-81-00-0"})
	first := prepare(t, d, vfClaim)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	if r := prepare(t, d, hcaClaim); r.Err != nil {
		t.Fatal(r.Err)
	}
	specBefore, _ := os.ReadFile(cdiSpecPath(e.cdi, "uid-vf"))
	if env := specView(readSpec(t, e.cdi, "uid-vf")).env; !slices.Contains(env, "NCCL_IB_HCA==mlx5_4") || !slices.Contains(env, "NCCL_IB_GID_INDEX=3") {
		t.Errorf("CDI env before the restart %v, want the VF's NCCL variables", env)
	}

	// restart: new registry, new driver, same state dir; the VF's RDMA
	// device meanwhile moved into the pod's netns
	e.claimed = NewClaimed()
	if err := e.s.RemoveRDMA("0000:41:00.2"); err != nil {
		t.Fatal(err)
	}
	d2, err := NewDriver(DriverOptions{NodeName: testNode, CDIDir: e.cdi, StateDir: e.state, DevInfoDir: e.devInfo, Claimed: e.claimed, DevicePlugin: e.dp,
		NCCLEnv: true, Pods: e.pods})
	if err != nil {
		t.Fatal(err)
	}
	if h := e.claimed.Holder("0000:41:00.2"); h != "DRA claim training/vf (uid-vf)" {
		t.Errorf("after reload the VF is held by %q", h)
	}
	if h := e.claimed.Holder("0000:81:00.0"); h != "DRA claim training/hca (uid-hca)" {
		t.Errorf("after reload the HCA is held by %q", h)
	}
	got := slices.Clone(d2.Prepared())
	slices.Sort(got)
	if !slices.Equal(got, []types.UID{"uid-hca", "uid-vf"}) {
		t.Errorf("reloaded claims %v", got)
	}
	e.rescan(t, d2)
	// kubelet restarted too (after a reboot: /var/run is empty) and
	// prepares again
	if err := os.Remove(cdiSpecPath(e.cdi, "uid-vf")); err != nil {
		t.Fatal(err)
	}
	if err := devinfo.Remove(e.devInfo, "example.com/sriov_rdma", "0000:41:00.2"); err != nil {
		t.Fatal(err)
	}
	again := prepare(t, d2, vfClaim)
	if again.Err != nil || again.Devices[0].CDIDeviceIDs[0] != first.Devices[0].CDIDeviceIDs[0] {
		t.Fatalf("Prepare after restart: %+v, want %+v", again, first)
	}
	if specAfter, _ := os.ReadFile(cdiSpecPath(e.cdi, "uid-vf")); string(specAfter) != string(specBefore) {
		t.Errorf("CDI spec rewritten differently:\n%s\nwas\n%s", specAfter, specBefore)
	}
	if info, _ := devinfo.Read(e.devInfo, "example.com/sriov_rdma", "0000:41:00.2"); info == nil || info.Pci.RdmaDevice != "mlx5_4" {
		t.Errorf("device-info after the second Prepare: %+v, want the one of the first (rdma mlx5_4)", info)
	}

	// the pod's second claim, prepared now, names both VFs' RDMA devices,
	// the first from the checkpoint (mlx5_4 is in the pod now)
	if r := prepare(t, d2, reserve(newClaim("uid-vf2", "vf2", alloc{"nic", "vf-0000-41-00-3"}), pod)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if env := specView(readSpec(t, e.cdi, "uid-vf2")).env; !slices.Equal(env, []string{"NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_4,mlx5_5", "PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=0000:41:00.3"}) {
		t.Errorf("CDI env of the pod's second claim after the restart: %v", env)
	}

	for _, uid := range []string{"uid-vf", "uid-vf2", "uid-hca", "uid-vf", "never-prepared"} {
		if err := unprepare(t, d2, uid); err != nil {
			t.Errorf("Unprepare %s: %v", uid, err)
		}
	}
	if _, err := os.Stat(cdiSpecPath(e.cdi, "uid-vf")); err == nil {
		t.Error("CDI spec left after Unprepare")
	}
	if info, _ := devinfo.Read(e.devInfo, "example.com/sriov_rdma", "0000:41:00.2"); info != nil {
		t.Error("device-info left after Unprepare")
	}
	if h := e.claimed.Holder("0000:41:00.2") + e.claimed.Holder("0000:81:00.0"); h != "" {
		t.Errorf("devices still held after Unprepare: %s", h)
	}
	cp, err := loadCheckpoint(e.state)
	if err != nil || len(cp.Claims) != 0 {
		t.Errorf("checkpoint after Unprepare: %v, %+v", err, cp)
	}
}

// TestCheckpointCorrupt: a checkpoint that is not the plugin's refuses the
// start with the file named and a fix.
func TestCheckpointCorrupt(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{name: "not JSON", content: "{", want: "is not valid JSON"},
		{name: "other version", content: `{"version":7,"claims":{}}`, want: "version 7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := NewDriver(DriverOptions{NodeName: testNode, StateDir: dir, DevicePlugin: &fakeDP{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, CheckpointFile)) || !strings.Contains(err.Error(), "fix:") {
				t.Errorf("NewDriver: %v, want an error naming the file, %q and a fix", err, tc.want)
			}
		})
	}
}

// TestDevicePluginRefusesDRAHeld: with the registry as the device plugin's
// Guard, a device a prepared claim holds is refused by Allocate, naming the
// claim, and allocatable again after Unprepare.
func TestDevicePluginRefusesDRAHeld(t *testing.T) {
	e := newDriverEnv(t)
	d := e.driver(t)
	if r := prepare(t, d, newClaim("uid-g", "guarded", alloc{"nic", "vf-0000-41-00-2"})); r.Err != nil {
		t.Fatal(r.Err)
	}
	_, pools := nodeState(t, e.s.Root, "", cfgAll)
	srv := deviceplugin.NewServer(pools[0], deviceplugin.ServerOptions{PluginDir: t.TempDir(), DevInfoDir: t.TempDir(), Guard: e.claimed})
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:41:00.2"}}}}
	_, err := srv.Allocate(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "held by DRA claim training/guarded (uid-g)") {
		t.Fatalf("Allocate of a DRA-held VF: %v", err)
	}
	if err := unprepare(t, d, "uid-g"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Allocate(context.Background(), req); err != nil {
		t.Fatalf("Allocate after Unprepare: %v", err)
	}
	// and that Allocate now keeps DRA off the VF for a while
	r := prepare(t, d, newClaim("uid-h", "late", alloc{"nic", "vf-0000-41-00-2"}))
	if r.Err == nil || !strings.Contains(r.Err.Error(), "handed out by the device plugin") {
		t.Errorf("Prepare right after a device-plugin Allocate: %v", r.Err)
	}
}

// TestPrepareNoDevicesOfOurs: a claim whose allocation has no device of
// this driver is prepared with no devices and no CDI spec file.
func TestPrepareNoDevicesOfOurs(t *testing.T) {
	e := newDriverEnv(t)
	d := e.driver(t)
	c := newClaim("uid-gpu", "gpu-only")
	c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: testNode, Device: "gpu-0"}}
	r := prepare(t, d, c)
	if r.Err != nil || len(r.Devices) != 0 {
		t.Fatalf("Prepare: %+v, want success without devices", r)
	}
	if _, err := os.Stat(cdiSpecPath(e.cdi, "uid-gpu")); err == nil {
		t.Error("a CDI spec without devices was written")
	}
	if err := unprepare(t, d, "uid-gpu"); err != nil {
		t.Error(err)
	}
}
