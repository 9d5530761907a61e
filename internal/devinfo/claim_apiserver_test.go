package devinfo

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceapply "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rdmanet/rdmanet/test/apiserver"
)

// TestClaimDataAPIServer: a real API server keeps ClaimData as an
// allocated device's status data, applied the way the meta CNI applies a
// claim's device status (server-side apply on the status subresource), and
// it reads back as the GUID and PKey.
func TestClaimDataAPIServer(t *testing.T) {
	srv := apiserver.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(srv.Config())
	const driver, node, dev = "rdma.rdmanet.io", "ib-node-excl", "vf-0000-c1-00-2"
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "ib-vf"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "rdma.rdmanet.io"`}}}}}
	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "ib-trainer-0-nic", Namespace: "default"}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "ib-vf"}}}}}}
	claim, err := cs.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "nic", Driver: driver, Pool: node, Device: dev}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	if _, err := cs.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ib := InfiniBandOf([]byte(ibSriovList), "02:00:00:00:00:00:00:01")
	status := resourceapply.AllocatedDeviceStatus().WithDriver(driver).WithPool(node).WithDevice(dev).
		WithConditions(metav1apply.Condition().WithType("Ready").WithStatus(metav1.ConditionTrue).WithReason("NetworkAttached").
			WithMessage("test").WithLastTransitionTime(metav1.Now())).
		WithNetworkData(resourceapply.NetworkDeviceData().WithInterfaceName("net1").WithHardwareAddress("02:00:00:00:00:00:00:01")).
		WithData(*ClaimData(ib))
	ac := resourceapply.ResourceClaim("ib-trainer-0-nic", "default").WithStatus(resourceapply.ResourceClaimStatus().WithDevices(status))
	if _, err := cs.ResourceV1().ResourceClaims("default").ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: "rdmanet-cni", Force: true}); err != nil {
		t.Fatalf("apply the claim's device status with the InfiniBand data: %v", err)
	}
	got, err := cs.ResourceV1().ResourceClaims("default").Get(ctx, "ib-trainer-0-nic", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Devices) != 1 || got.Status.Devices[0].Data == nil {
		t.Fatalf("status.devices = %+v, want one entry with data", got.Status.Devices)
	}
	var back struct {
		InfiniBand *InfiniBand `json:"infiniband"`
	}
	if err := json.Unmarshal(got.Status.Devices[0].Data.Raw, &back); err != nil || !reflect.DeepEqual(back.InfiniBand, ib) {
		t.Fatalf("data read back = %s (%v), want %+v", got.Status.Devices[0].Data.Raw, err, ib)
	}
}
