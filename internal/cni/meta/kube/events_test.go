package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
)

func TestAttachEventWanted(t *testing.T) {
	pod := meta.PodIdentity{Namespace: "ai", Name: "p0", UID: "u"}
	tests := []struct {
		name string
		pod  meta.PodIdentity
		err  error
		want bool
	}{
		{name: "failed ADD of a pod", pod: pod, err: errors.New("no device"), want: true},
		{name: "no error", pod: pod, err: nil, want: false},
		{name: "no pod in CNI_ARGS", pod: meta.PodIdentity{}, err: errors.New("x"), want: false},
		{name: "pod gone during ADD", pod: pod, err: fmt.Errorf("get pod ai/p0: %w", meta.ErrNotFound), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := attachEventWanted(tc.pod, tc.err); got != tc.want {
				t.Errorf("attachEventWanted = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKubeEventsAggregates: the Event reaches the API as a Warning on the
// pod, and the same failure repeated is one Event with a count, not one
// Event per ADD.
func TestKubeEventsAggregates(t *testing.T) {
	client := fake.NewClientset()
	k := NewKubeEvents(client, "node-a")
	defer k.Shutdown()
	pod := meta.PodIdentity{Namespace: "ai", Name: "p0", UID: "uid-0"}
	for range 5 {
		k.AttachFailed(pod, "c0ffee", errors.New("no VF of resource rdma/sriov_a for the pod: fix: request it"))
	}
	var evs []corev1.Event
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, err := client.CoreV1().Events("ai").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		evs = l.Items
		if len(evs) == 1 && evs[0].Count == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %+v, want one with count 5", evs)
		}
	}
	e := evs[0]
	if e.Type != corev1.EventTypeWarning || e.Reason != EventReasonAttachFailed || e.InvolvedObject.Name != "p0" ||
		e.InvolvedObject.UID != "uid-0" || e.Source.Component != EventComponent || e.Source.Host != "node-a" {
		t.Errorf("event %+v", e)
	}
	if !strings.Contains(e.Message, "fix: request it") {
		t.Errorf("message %q lacks the fix", e.Message)
	}
}
