package kube

import (
	"context"
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestSliceResolverListsTheNodesSlices: with a node name the resolver asks
// for the node's own slices (spec.nodeName, indexed by the API server's
// watch cache) and lists the pool's slices wherever they are only for a
// device not found there. The fake server selects by the three fields as
// the real one does (TestClaimAttachmentAPIServer covers the real one).
func TestSliceResolverListsTheNodesSlices(t *testing.T) {
	const driver = "rdma.rdmanet.io"
	mk := func(name, pool string, node *string, devs ...resourcev1.Device) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
			Driver: driver, Pool: resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1}, NodeName: node, AllNodes: ptr.To(node == nil),
			Devices: devs}}
	}
	all := []*resourcev1.ResourceSlice{
		mk("a", "node-a", ptr.To("node-a"), netDevice("vf-1", "example.com/vf", "0000:41:00.2")),
		mk("b", "node-b", ptr.To("node-b"), netDevice("vf-1", "example.com/vf", "0000:42:00.2")),
		mk("fabric", "fabric", nil, netDevice("port-7", "example.com/fabric", "0000:99:00.7")),
	}
	tests := []struct {
		name, node, pool, device string
		wantID                   string
		wantSelectors            []string
	}{
		{name: "the node's own device: one list of the node's slices", node: "node-a", pool: "node-a", device: "vf-1", wantID: "0000:41:00.2",
			wantSelectors: []string{"spec.driver=rdma.rdmanet.io,spec.nodeName=node-a,spec.pool.name=node-a"}},
		{name: "a network-attached pool: the node's slices, then the pool's", node: "node-a", pool: "fabric", device: "port-7", wantID: "0000:99:00.7",
			wantSelectors: []string{"spec.driver=rdma.rdmanet.io,spec.nodeName=node-a,spec.pool.name=fabric", "spec.driver=rdma.rdmanet.io,spec.pool.name=fabric"}},
		{name: "no node name (the host fallback): the pool's slices", pool: "node-b", device: "vf-1", wantID: "0000:42:00.2",
			wantSelectors: []string{"spec.driver=rdma.rdmanet.io,spec.pool.name=node-b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var got []string
			client.PrependReactor("list", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
				sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
				got = append(got, sel.String())
				out := &resourcev1.ResourceSliceList{}
				for _, s := range all {
					set := fields.Set{resourcev1.ResourceSliceSelectorDriver: s.Spec.Driver, resourcev1.ResourceSliceSelectorPoolName: s.Spec.Pool.Name,
						resourcev1.ResourceSliceSelectorNodeName: ptr.Deref(s.Spec.NodeName, "")}
					if sel.Matches(set) {
						out.Items = append(out.Items, *s)
					}
				}
				return true, out, nil
			})
			r := NewSliceResolver(client, tc.node)
			res, id, ok, err := r.Resolve(context.Background(), driver, tc.pool, tc.device)
			if err != nil || !ok || id != tc.wantID || res == "" {
				t.Fatalf("Resolve = %q %q %v %v, want deviceID %s", res, id, ok, err, tc.wantID)
			}
			if !slices.Equal(got, tc.wantSelectors) {
				t.Errorf("lists with field selectors %q, want %q", got, tc.wantSelectors)
			}
			// cached: no further list for the same device
			if _, _, _, err := r.Resolve(context.Background(), driver, tc.pool, tc.device); err != nil || len(got) != len(tc.wantSelectors) {
				t.Errorf("second Resolve: %v, %d lists in all, want the cache", err, len(got))
			}
		})
	}
}
