package dra

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestKubeEvents: a device health Event lands on the pod, typed by the
// health, with the agent as source component and the node as source host
// (what the node-identity policy checks).
func TestKubeEvents(t *testing.T) {
	client := fake.NewClientset()
	k := NewKubeEvents(client, testNode)
	defer k.Shutdown()
	pod := PodRef{Namespace: "training", Name: "trainer-0", UID: "pod-uid"}
	k.DeviceHealthEvent(pod, true, EventReasonDeviceUnhealthy, "pod training/trainer-0: RDMA device vf-0000-41-00-2 … is Unhealthy")
	k.DeviceHealthEvent(pod, false, EventReasonDeviceHealthy, "pod training/trainer-0: RDMA device vf-0000-41-00-2 … is Healthy again")
	var evs []corev1.Event
	for deadline := time.Now().Add(30 * time.Second); len(evs) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		l, err := client.CoreV1().Events("training").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		evs = l.Items
	}
	if len(evs) != 2 {
		t.Fatalf("events %+v: want 2", evs)
	}
	byReason := map[string]corev1.Event{}
	for _, e := range evs {
		byReason[e.Reason] = e
	}
	for reason, typ := range map[string]string{EventReasonDeviceUnhealthy: corev1.EventTypeWarning, EventReasonDeviceHealthy: corev1.EventTypeNormal} {
		e, ok := byReason[reason]
		if !ok || e.Type != typ || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != "trainer-0" || e.InvolvedObject.UID != "pod-uid" ||
			e.Source.Component != EventComponent || e.Source.Host != testNode {
			t.Errorf("event %s: %+v; want type %s on pod trainer-0 from %s on %s", reason, e, typ, EventComponent, testNode)
		}
	}
}
