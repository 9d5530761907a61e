package kube

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
)

// EventReasonAttachFailed is the reason of the Warning Event a failed ADD
// records on its pod (`kubectl describe pod` shows it under Events).
const EventReasonAttachFailed = "RDMANetAttachFailed"

// EventComponent is the source component of rdmanet's pod Events.
const EventComponent = "rdmanet-cni"

// EventRecorder records Kubernetes Events on pods. The daemon calls it on
// the CNI call's path: it must not block.
type EventRecorder interface {
	// AttachFailed records that ADD of containerID failed for the pod,
	// with err's text (the CNI error the runtime reports, fix included).
	AttachFailed(pod meta.PodIdentity, containerID string, err error)
}

// KubeEvents records Events through client-go's event broadcaster: events
// are sent asynchronously, and its correlator aggregates repeats of one
// message on one pod into one Event with a count and rate-limits each pod
// (a burst of 25, then one per 5 minutes), so a pod whose ADD fails in a
// loop never floods the API server.
type KubeEvents struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// NewKubeEvents starts a broadcaster that writes Events with client; host
// is the node name reported as the Event's source host.
func NewKubeEvents(client kubernetes.Interface, host string) *KubeEvents {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &KubeEvents{broadcaster: b,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: host})}
}

// AttachFailed records a Warning Event on the pod. A call without a pod
// (no K8S_POD_* in CNI_ARGS) and a pod that is gone get none.
func (k *KubeEvents) AttachFailed(pod meta.PodIdentity, containerID string, err error) {
	if !attachEventWanted(pod, err) {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	k.recorder.Event(ref, corev1.EventTypeWarning, EventReasonAttachFailed, attachEventMessage(containerID, err))
}

// Shutdown flushes nothing more and stops the broadcaster.
func (k *KubeEvents) Shutdown() { k.broadcaster.Shutdown() }

// attachEventWanted: an Event needs a pod to hang on, and a pod deleted
// during its ADD is not news.
func attachEventWanted(pod meta.PodIdentity, err error) bool {
	return err != nil && pod.Namespace != "" && pod.Name != "" && !errors.Is(err, meta.ErrNotFound)
}

// attachEventMessage is the Event's text: the CNI error as the runtime
// reports it (reason and fix), with the sandbox it was for. The API server
// caps an Event message at 1 KiB; the broadcaster truncates longer ones.
func attachEventMessage(containerID string, err error) string {
	id := containerID
	if len(id) > 12 {
		id = id[:12]
	}
	return fmt.Sprintf("rdmanet ADD of sandbox %s failed: %v", id, err)
}
