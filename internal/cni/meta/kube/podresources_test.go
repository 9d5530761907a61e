package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
)

// fakeSlices resolves "driver/pool/device" keys; missing keys are not
// network devices.
type fakeSlices map[string][2]string

func (f fakeSlices) Resolve(_ context.Context, driver, pool, device string) (string, string, bool, error) {
	if device == "broken" {
		return "", "", false, errors.New("slice lookup failed")
	}
	v, ok := f[driver+"/"+pool+"/"+device]
	return v[0], v[1], ok, nil
}

func claimRes(claim string, devs ...string) *podresourcesapi.DynamicResource {
	dr := &podresourcesapi.DynamicResource{ClaimName: claim, ClaimNamespace: "ai"}
	for _, d := range devs {
		driver, dev, _ := strings.Cut(d, ":")
		dr.ClaimResources = append(dr.ClaimResources, &podresourcesapi.ClaimResource{DriverName: driver, PoolName: "node-a", DeviceName: dev})
	}
	return dr
}

// TestCollectClaimDevices: a pod's DRA devices join its device plugin
// devices under the resource name their ResourceSlice gives, each claim
// device once although kubelet lists it under every container using the
// claim; devices that are not network devices are set aside, named.
func TestCollectClaimDevices(t *testing.T) {
	const res = "example.com/sriov_rdma"
	slices_ := fakeSlices{
		"rdma.rdmanet.io/node-a/vf-0000-41-00-2": {res, "0000:41:00.2"},
		"rdma.rdmanet.io/node-a/vf-0000-41-00-3": {res, "0000:41:00.3"},
		"rdma.rdmanet.io/node-a/dup":             {res, "0000:41:00.2"},
	}
	dp := &podresourcesapi.ContainerDevices{ResourceName: "example.com/other", DeviceIds: []string{"0000:81:00.2"}}
	tests := []struct {
		name       string
		containers []*podresourcesapi.ContainerResources
		resolver   ClaimDeviceResolver
		want       meta.Devices
		wantClaims []string // device IDs with a claim
		unresolved []string // substrings of Allocation.Unresolved
		wantErr    string
	}{
		{name: "device plugin only", containers: []*podresourcesapi.ContainerResources{{Devices: []*podresourcesapi.ContainerDevices{dp}}},
			resolver: slices_, want: meta.Devices{"example.com/other": {"0000:81:00.2"}}},
		{name: "claim shared by two containers: its VF once", resolver: slices_, containers: []*podresourcesapi.ContainerResources{
			{Name: "a", DynamicResources: []*podresourcesapi.DynamicResource{claimRes("nic", "rdma.rdmanet.io:vf-0000-41-00-2")}},
			{Name: "b", DynamicResources: []*podresourcesapi.DynamicResource{claimRes("nic", "rdma.rdmanet.io:vf-0000-41-00-2")}}},
			want: meta.Devices{res: {"0000:41:00.2"}}, wantClaims: []string{"0000:41:00.2"}},
		{name: "GPU and two VFs in one claim, plus a device plugin device", resolver: slices_, containers: []*podresourcesapi.ContainerResources{
			{Devices: []*podresourcesapi.ContainerDevices{dp}, DynamicResources: []*podresourcesapi.DynamicResource{
				claimRes("rail", "gpu.nvidia.com:gpu-0", "rdma.rdmanet.io:vf-0000-41-00-2", "rdma.rdmanet.io:vf-0000-41-00-3")}}},
			want:       meta.Devices{"example.com/other": {"0000:81:00.2"}, res: {"0000:41:00.2", "0000:41:00.3"}},
			wantClaims: []string{"0000:41:00.2", "0000:41:00.3"}, unresolved: []string{"claim ai/rail device gpu.nvidia.com/node-a/gpu-0 (not a network device"}},
		{name: "no resolver: DRA devices named, not used", containers: []*podresourcesapi.ContainerResources{
			{DynamicResources: []*podresourcesapi.DynamicResource{claimRes("nic", "rdma.rdmanet.io:vf-0000-41-00-2")}}},
			want: meta.Devices{}, unresolved: []string{"vf-0000-41-00-2 (no ResourceSlice lookup configured)"}},
		{name: "lookup fails: the ADD fails naming the claim", resolver: slices_, containers: []*podresourcesapi.ContainerResources{
			{DynamicResources: []*podresourcesapi.DynamicResource{claimRes("nic", "rdma.rdmanet.io:broken")}}},
			wantErr: "pod ai/p: claim ai/nic device rdma.rdmanet.io/node-a/broken: slice lookup failed"},
		{name: "two devices with one deviceID", resolver: slices_, containers: []*podresourcesapi.ContainerResources{
			{DynamicResources: []*podresourcesapi.DynamicResource{claimRes("nic", "rdma.rdmanet.io:vf-0000-41-00-2", "rdma.rdmanet.io:dup")}}},
			wantErr: "both have deviceID 0000:41:00.2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &PodResourcesClient{Claims: tc.resolver}
			got, err := c.collect(context.Background(), &podresourcesapi.PodResources{Namespace: "ai", Name: "p", Containers: tc.containers})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Devices) != len(tc.want) {
				t.Fatalf("devices = %v, want %v", got.Devices, tc.want)
			}
			for r, ids := range tc.want {
				if !slices.Equal(got.Devices[r], ids) {
					t.Fatalf("devices[%s] = %v, want %v", r, got.Devices[r], ids)
				}
			}
			var claimed []string
			for id, cd := range got.Claims {
				if cd.Namespace != "ai" || cd.Pool != "node-a" {
					t.Errorf("claim device %s = %+v", id, cd)
				}
				claimed = append(claimed, id)
			}
			slices.Sort(claimed)
			if !slices.Equal(claimed, tc.wantClaims) {
				t.Fatalf("claim devices %v, want %v", claimed, tc.wantClaims)
			}
			all := strings.Join(got.Unresolved, "\n")
			for _, u := range tc.unresolved {
				if !strings.Contains(all, u) {
					t.Errorf("unresolved %q, want it to contain %q", all, u)
				}
			}
			if len(tc.unresolved) == 0 && all != "" {
				t.Errorf("unresolved %q, want none", all)
			}
		})
	}
}
