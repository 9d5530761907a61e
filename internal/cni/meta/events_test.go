package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

// recordedEvents is an EventRecorder that keeps what it is given.
type recordedEvents struct {
	mu   sync.Mutex
	pods []PodRef
	msgs []string
}

func (r *recordedEvents) AttachFailed(pod PodRef, containerID string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = append(r.pods, pod)
	r.msgs = append(r.msgs, attachEventMessage(containerID, err))
}

// TestDaemonRecordsFailedAttach: a failed ADD reaches the Events recorder
// with the pod of CNI_ARGS and the CNI error's text; a DEL never does.
func TestDaemonRecordsFailedAttach(t *testing.T) {
	dir := t.TempDir()
	writePodManifest(t, dir, "p0", "uid-0")
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"rdmanet","type":"rdmanet","clusterNetwork":"absent-net",
		"cniDir":%q,"source":{"type":"static","dir":%q}}`, t.TempDir(), dir)
	ev := &recordedEvents{}
	d := &Daemon{Source: &StaticSource{Dir: dir, StatusDir: t.TempDir()}, Events: ev, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	args := "K8S_POD_NAMESPACE=ai;K8S_POD_NAME=p0;K8S_POD_UID=uid-0;K8S_POD_INFRA_CONTAINER_ID=c0ffee0123456789"
	req := daemonclient.Request{Version: daemonclient.Version, Command: "ADD", ContainerID: "c0ffee0123456789", Netns: "/proc/self/ns/net",
		IfName: "eth0", Args: args, Config: json.RawMessage(conf)}
	_, err := d.Call(context.Background(), req)
	if err == nil {
		t.Fatal("ADD with an absent clusterNetwork succeeded")
	}
	del := req
	del.Command = "DEL"
	_, _ = d.Call(context.Background(), del)
	if len(ev.pods) != 1 {
		t.Fatalf("recorded %d events (%v), want 1 for the failed ADD", len(ev.pods), ev.msgs)
	}
	if want := (PodRef{Namespace: "ai", Name: "p0", UID: "uid-0"}); ev.pods[0] != want {
		t.Errorf("event on %+v, want %+v", ev.pods[0], want)
	}
	for _, w := range []string{"c0ffee012345", "absent-net", err.Error()} {
		if !strings.Contains(ev.msgs[0], w) {
			t.Errorf("event message %q lacks %q", ev.msgs[0], w)
		}
	}
}

func TestAttachEventWanted(t *testing.T) {
	pod := PodRef{Namespace: "ai", Name: "p0", UID: "u"}
	tests := []struct {
		name string
		pod  PodRef
		err  error
		want bool
	}{
		{name: "failed ADD of a pod", pod: pod, err: errors.New("no device"), want: true},
		{name: "no error", pod: pod, err: nil, want: false},
		{name: "no pod in CNI_ARGS", pod: PodRef{}, err: errors.New("x"), want: false},
		{name: "pod gone during ADD", pod: pod, err: fmt.Errorf("get pod ai/p0: %w", ErrNotFound), want: false},
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
	pod := PodRef{Namespace: "ai", Name: "p0", UID: "uid-0"}
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
