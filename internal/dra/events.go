package dra

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventComponent is the source component of the agent's pod Events.
const EventComponent = "rdmanet-agent"

// KubeEvents records the device health Events (HealthEvents) through
// client-go's event broadcaster, as the daemon's CNI Events do
// (internal/cni/meta/events.go): sent asynchronously, repeats of one
// message on one pod aggregated into one Event with a count, each pod
// rate-limited, so a flapping link never floods the API server. The
// Event's source host is the node, as rdmanet's node-identity policy wants.
type KubeEvents struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

var _ HealthEvents = (*KubeEvents)(nil)

// NewKubeEvents starts a broadcaster that writes Events with client as
// node host.
func NewKubeEvents(client kubernetes.Interface, host string) *KubeEvents {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &KubeEvents{broadcaster: b,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: host})}
}

// DeviceHealthEvent records a Warning (unhealthy) or Normal Event on pod.
func (k *KubeEvents) DeviceHealthEvent(pod PodRef, unhealthy bool, reason, message string) {
	typ := corev1.EventTypeNormal
	if unhealthy {
		typ = corev1.EventTypeWarning
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	k.recorder.Event(ref, typ, reason, message)
}

// Shutdown stops the broadcaster.
func (k *KubeEvents) Shutdown() { k.broadcaster.Shutdown() }
