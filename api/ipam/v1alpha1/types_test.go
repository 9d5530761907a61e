package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDeepCopyIsIndependent(t *testing.T) {
	in := &IPAMBlock{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{LabelNode: "n1"}},
		Spec: IPAMBlockSpec{Network: "net", CIDR: "10.0.0.0/26", Node: "n1",
			Allocations: map[string]Allocation{"10.0.0.1": {ContainerID: "c1", IfName: "net1"}}},
	}
	out := in.DeepCopy()
	out.Spec.Allocations["10.0.0.2"] = Allocation{ContainerID: "c2"}
	out.Labels[LabelNode] = "n2"
	if len(in.Spec.Allocations) != 1 {
		t.Fatalf("copy shares the allocation map with the original: %v", in.Spec.Allocations)
	}
	if in.Labels[LabelNode] != "n1" {
		t.Fatalf("copy shares labels with the original: %v", in.Labels)
	}
	list := &IPAMBlockList{Items: []IPAMBlock{*in}}
	lc := list.DeepCopyObject().(*IPAMBlockList)
	lc.Items[0].Spec.Allocations["x"] = Allocation{}
	if len(list.Items[0].Spec.Allocations) != 1 {
		t.Fatal("list copy shares items with the original")
	}
}
