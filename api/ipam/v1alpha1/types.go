// Package v1alpha1 holds the rdmanet.io/v1alpha1 IPAM API: IPAMBlock, one
// aligned block of addresses of an IPAM pool, claimed by one node.
//
// A pool is identified by (network name, range CIDR). Nodes claim blocks by
// creating an IPAMBlock whose name is derived from the pool and the block's
// base address, so two nodes racing for the same block get AlreadyExists for
// all but one. Allocations live inside the block and are changed with an
// update carrying the block's resourceVersion (optimistic concurrency).
//
// +groupName=rdmanet.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of rdmanet's CRDs.
const GroupName = "rdmanet.io"

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource of IPAMBlock, for REST paths.
const (
	IPAMBlockResource = "ipamblocks"
	IPAMBlockKind     = "IPAMBlock"
)

// Labels set on every IPAMBlock so a node lists only its own blocks and one pool.
const (
	// LabelPool is a short hash of (network, range CIDR).
	LabelPool = "rdmanet.io/pool"
	// LabelNode is the claiming node's name (or its hash when it is not a valid label value).
	LabelNode = "rdmanet.io/node"
	// LabelNetwork is the network name (or its hash when not a valid label value).
	LabelNetwork = "rdmanet.io/network"
)

// IPAMBlock is a node's claim on one aligned block of a pool's addresses.
type IPAMBlock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAMBlockSpec `json:"spec"`
}

// IPAMBlockSpec is the block, its owner and its allocations.
type IPAMBlockSpec struct {
	// Network is the IPAM network name (network_name in the CNI config; "default" when unset).
	Network string `json:"network"`
	// Range is the pool's CIDR (the range's network, e.g. 10.60.0.0/16).
	Range string `json:"range"`
	// CIDR is this block, an aligned sub-prefix of Range (e.g. 10.60.1.64/26).
	CIDR string `json:"cidr"`
	// Node is the node that claimed the block.
	Node string `json:"node"`
	// Allocations maps an address of the block (canonical text form) to its holder.
	Allocations map[string]Allocation `json:"allocations,omitempty"`
}

// Allocation is the holder of one address.
type Allocation struct {
	// ContainerID and IfName identify the CNI attachment (the idempotency key).
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	// Pod identity from CNI_ARGS, used by garbage collection. PodUID protects a
	// recreated pod of the same name (StatefulSet) from losing its address.
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
	PodUID       string `json:"podUID,omitempty"`
	// Node is set when the allocating node is not the block's node: the
	// address was borrowed because the range was nearly full. Empty means
	// the block's node.
	Node string `json:"node,omitempty"`
	// Created is when the address was allocated (RFC 3339, the allocating
	// node's clock). Garbage collection never releases an allocation younger
	// than its grace period; empty (older releases) counts as old.
	Created string `json:"created,omitempty"`
	// Reserved, when set, marks an address that no pod may hold, with the
	// reason ("gateway"); ContainerID and IfName are then empty. Garbage
	// collection keeps reservations.
	Reserved string `json:"reserved,omitempty"`
}

// IPAMBlockList is a list of IPAMBlocks.
type IPAMBlockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []IPAMBlock `json:"items"`
}

// DeepCopyInto copies the spec, including its allocation map.
func (in *IPAMBlockSpec) DeepCopyInto(out *IPAMBlockSpec) {
	*out = *in
	if in.Allocations != nil {
		out.Allocations = make(map[string]Allocation, len(in.Allocations))
		for k, v := range in.Allocations {
			out.Allocations[k] = v
		}
	}
}

// DeepCopyInto copies the block.
func (in *IPAMBlock) DeepCopyInto(out *IPAMBlock) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a copy of the block.
func (in *IPAMBlock) DeepCopy() *IPAMBlock {
	if in == nil {
		return nil
	}
	out := new(IPAMBlock)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *IPAMBlock) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the list.
func (in *IPAMBlockList) DeepCopyInto(out *IPAMBlockList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]IPAMBlock, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of the list.
func (in *IPAMBlockList) DeepCopy() *IPAMBlockList {
	if in == nil {
		return nil
	}
	out := new(IPAMBlockList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *IPAMBlockList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

var (
	// SchemeBuilder registers this package's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &IPAMBlock{}, &IPAMBlockList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
