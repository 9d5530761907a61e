package kube

// Apiserver tier: the DRA side of attachment against a real kube-apiserver,
// as the daemon's identity with only deploy/rbac-daemon.yaml's rights:
// ResourceSlice lookup (SliceResolver) and the claim's device status
// (SetClaimNetworks), which the API server authorizes per driver.

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/test/apiserver"
)

// ibSriovConf is an ib-sriov delegate's config as the meta plugin runs it.
const ibSriovConf = `{"cniVersion":"0.3.1","name":"ib-training-rdma","plugins":[{"type":"ib-sriov","pkey":"0x8005","link_state":"enable",` +
	`"rdmaIsolation":true,"ibKubernetesEnabled":false,"capabilities":{"infinibandGUID":true},"deviceID":"0000:c1:00.2",` +
	`"ipam":{"type":"whereabouts","range":"10.61.0.0/16","exclude":["10.61.0.0/24"]}}]}`

const daemonSA = "system:serviceaccount:rdmanet-system:rdmanet-daemon"

func strAttr(v string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &v} }

// netDevice is a device as rdmanet's driver publishes it (the two
// attributes the meta CNI reads).
func netDevice(name, resource, pci string) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		SliceResourceNameAttr: strAttr(resource), SliceDeviceIDAttr: strAttr(pci)}}
}

func TestClaimAttachmentAPIServer(t *testing.T) {
	srv := apiserver.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	if err := apiserver.ApplyRBACFile(ctx, admin, "deploy/rbac-daemon.yaml"); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	const node, res = "node-a", "example.com/sriov_rdma"
	// The daemon's token is bound to its pod on node-a: the API server adds
	// the node-name extra, which is what lets "associated-node:patch" (its
	// only resourceclaims/driver grant) apply to claims allocated there.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: daemonSA, Groups: []string{"system:serviceaccounts", "system:authenticated"},
		Extra: map[string][]string{"authentication.kubernetes.io/node-name": {node}}}
	daemon := kubernetes.NewForConfigOrDie(cfg)

	slice := func(name, driver, pool string, gen int64, devs ...resourcev1.Device) {
		t.Helper()
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
			Driver: driver, Pool: resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: 1}, NodeName: ptr.To(node), Devices: devs}}
		if _, err := admin.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice("old", meta.ClaimStatusDriver, node, 1, netDevice("vf-0000-41-00-2", "example.com/old", "0000:41:00.9"))
	slice("new", meta.ClaimStatusDriver, node, 2, netDevice("vf-0000-41-00-2", res, "0000:41:00.2"), netDevice("vf-0000-41-00-3", res, "0000:41:00.3"))
	slice("gpus", "gpu.example.com", node, 1, resourcev1.Device{Name: "gpu-0"})
	// a network-attached pool: its slice names no node
	attached := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "net.example.com", Pool: resourcev1.ResourcePool{Name: "fabric", Generation: 1, ResourceSliceCount: 1}, AllNodes: ptr.To(true),
		Devices: []resourcev1.Device{netDevice("port-7", "example.com/fabric", "0000:99:00.7")}}}
	if _, err := admin.ResourceV1().ResourceSlices().Create(ctx, attached, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := NewSliceResolver(daemon, node)
	tests := []struct {
		name, driver, pool, device string
		wantRes, wantID            string
		wantOK                     bool
		wantErr                    string
	}{
		{name: "network-attached pool (no node): found beyond the node's own slices", driver: "net.example.com", pool: "fabric", device: "port-7", wantRes: "example.com/fabric", wantID: "0000:99:00.7", wantOK: true},
		{name: "VF: newest generation's attributes", driver: meta.ClaimStatusDriver, device: "vf-0000-41-00-2", wantRes: res, wantID: "0000:41:00.2", wantOK: true},
		{name: "second VF from the cache", driver: meta.ClaimStatusDriver, device: "vf-0000-41-00-3", wantRes: res, wantID: "0000:41:00.3", wantOK: true},
		{name: "GPU of another driver: not a network device", driver: "gpu.example.com", device: "gpu-0"},
		{name: "device no slice has", driver: meta.ClaimStatusDriver, device: "vf-0000-41-00-7", wantErr: "kubectl get resourceslices --field-selector spec.driver=rdma.rdmanet.io,spec.pool.name=node-a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotRes, gotID, ok, err := r.Resolve(ctx, tc.driver, cmp.Or(tc.pool, node), tc.device)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.wantOK || gotRes != tc.wantRes || gotID != tc.wantID {
				t.Fatalf("Resolve = %q %q %v %v, want %q %q %v", gotRes, gotID, ok, err, tc.wantRes, tc.wantID, tc.wantOK)
			}
		})
	}

	// The claim the pod's VF came through, allocated as the scheduler would.
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "vf"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "rdma.rdmanet.io"`}}}}}
	if _, err := admin.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "trainer-0-nic", Namespace: "default"}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "vf"}}}}}}
	claim, err := admin.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "nic", Driver: meta.ClaimStatusDriver, Pool: node, Device: "vf-0000-41-00-2"}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	if _, err := admin.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	src := &KubeSource{Core: daemon}
	n := meta.ClaimNetwork{ClaimDevice: meta.ClaimDevice{Namespace: "default", Claim: "trainer-0-nic", Driver: meta.ClaimStatusDriver, Pool: node, Device: "vf-0000-41-00-2"},
		Pod: "default/trainer-0", Interface: "net1", IPs: []string{"192.168.100.7/24"}, MAC: "02:00:00:00:41:02"}
	if err := src.SetClaimNetworks(ctx, []meta.ClaimNetwork{n}); err != nil {
		t.Fatalf("SetClaimNetworks with deploy/rbac-daemon.yaml's rights: %v", err)
	}
	got, err := admin.ResourceV1().ResourceClaims("default").Get(ctx, "trainer-0-nic", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Devices) != 1 {
		t.Fatalf("status.devices = %+v, want one entry", got.Status.Devices)
	}
	d := got.Status.Devices[0]
	if d.Device != "vf-0000-41-00-2" || d.NetworkData == nil || d.NetworkData.InterfaceName != "net1" ||
		strings.Join(d.NetworkData.IPs, ",") != "192.168.100.7/24" || d.NetworkData.HardwareAddress != "02:00:00:00:41:02" {
		t.Fatalf("status.devices[0] = %+v (networkData %+v)", d, d.NetworkData)
	}
	if len(d.Conditions) != 1 || d.Conditions[0].Type != "Ready" || d.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("conditions = %+v, want Ready=True", d.Conditions)
	}
	if d.Data != nil {
		t.Fatalf("an Ethernet VF's device status has data %s, want none", d.Data.Raw)
	}
	// Written again (a new sandbox of the pod): still one entry, new data.
	n.IPs = []string{"192.168.100.8/24"}
	if err := src.SetClaimNetworks(ctx, []meta.ClaimNetwork{n}); err != nil {
		t.Fatal(err)
	}
	got, _ = admin.ResourceV1().ResourceClaims("default").Get(ctx, "trainer-0-nic", metav1.GetOptions{})
	if len(got.Status.Devices) != 1 || got.Status.Devices[0].NetworkData.IPs[0] != "192.168.100.8/24" {
		t.Fatalf("after the second write: %+v", got.Status.Devices)
	}
	// Another driver's device of the claim: the daemon may not write it.
	other := n
	other.Driver = "gpu.example.com"
	if err := src.SetClaimNetworks(ctx, []meta.ClaimNetwork{other}); err == nil || !strings.Contains(err.Error(), "trainer-0-nic") {
		t.Fatalf("writing another driver's device status: err = %v, want a refusal naming the claim", err)
	}

	// An IB VF's claim, from an ib-sriov delegate's result to the API
	// server: the GUID and PKey are the device status' data.
	ibClaim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "ib-trainer-0-nic", Namespace: "default"}, Spec: claim.Spec}
	ibClaim, err = admin.ResourceV1().ResourceClaims("default").Create(ctx, ibClaim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ibClaim.Status.Allocation = claim.Status.Allocation.DeepCopy()
	ibClaim.Status.Allocation.Devices.Results[0].Device = "vf-0000-41-00-3"
	if _, err := admin.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, ibClaim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const guid = "02:00:00:00:00:00:00:07"
	// what meta's claimNetworks makes of the ib-sriov delegate's result
	// (TestClaimNetworksInfiniBand): the GUID is its 8-byte MAC
	nets := []meta.ClaimNetwork{{ClaimDevice: meta.ClaimDevice{Namespace: "default", Claim: "ib-trainer-0-nic", Driver: meta.ClaimStatusDriver, Pool: node, Device: "vf-0000-41-00-3"},
		Pod: "default/ib-trainer-0", Interface: "net1", MAC: guid, InfiniBand: devinfo.InfiniBandOf([]byte(ibSriovConf), guid)}}
	if err := src.SetClaimNetworks(ctx, nets); err != nil {
		t.Fatalf("SetClaimNetworks (IB) with deploy/rbac-daemon.yaml's rights: %v", err)
	}
	got, err = admin.ResourceV1().ResourceClaims("default").Get(ctx, "ib-trainer-0-nic", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Devices) != 1 || got.Status.Devices[0].NetworkData == nil || got.Status.Devices[0].NetworkData.HardwareAddress != guid {
		t.Fatalf("IB claim status.devices = %+v", got.Status.Devices)
	}
	var data struct {
		InfiniBand *devinfo.InfiniBand `json:"infiniband"`
	}
	if d := got.Status.Devices[0].Data; d == nil || json.Unmarshal(d.Raw, &data) != nil || data.InfiniBand == nil ||
		*data.InfiniBand != (devinfo.InfiniBand{GUID: guid, PKey: "0x8005", Plugin: devinfo.TypeIBSriov}) {
		t.Fatalf("IB claim device status data = %v, want the GUID %s, PKey 0x8005, plugin ib-sriov", got.Status.Devices[0].Data, guid)
	}
}
