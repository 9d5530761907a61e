// Package webhook is the admission side of rdmanet-controller: a mutating
// webhook that gives a pod opting in with rdmanet.io/ annotations what its
// RDMA mode needs, and a validating webhook that runs the `kubectl rdma lint`
// rule engine (internal/lint) over RDMA pods. Setup plugs both, and the
// certificate manager of package certs, into a controller-runtime manager.
package webhook

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rdmanet/rdmanet/internal/lint"
)

// Pod annotations of the opt-in (see docs/webhook.md).
const (
	// AnnotationNetwork opts a pod into exclusive (SR-IOV VF) or shared
	// (macvlan on a shared HCA) mode: "[<namespace>/]<nad-name>". The NAD's
	// plugin chain decides the mode.
	AnnotationNetwork = "rdmanet.io/network"
	// AnnotationMode is "host" for hostNetwork RDMA; "exclusive" or
	// "shared" next to AnnotationNetwork asserts the NAD's mode.
	AnnotationMode = "rdmanet.io/mode"
	// AnnotationResource names the RDMA device resource to request: the
	// shared pool of a hostNetwork pod, or the resource of a NAD that has no
	// k8s.v1.cni.cncf.io/resourceName annotation (operator-generated macvlan
	// NADs).
	AnnotationResource = "rdmanet.io/resource"
	// AnnotationContainer names the training container (default: the first).
	AnnotationContainer = "rdmanet.io/container"
	// AnnotationInterface is the in-pod name of the RDMA interface (default net1).
	AnnotationInterface = "rdmanet.io/interface"
	// AnnotationSocketIfname is NCCL_SOCKET_IFNAME for a hostNetwork pod
	// (the node's interface on the RDMA NIC; the webhook cannot know it).
	AnnotationSocketIfname = "rdmanet.io/socket-ifname"

	// NodeLabelNetnsMode is the node label rdmanet-controller writes from
	// the agent's inventory: the RDMA subsystem's netns mode.
	NodeLabelNetnsMode = "rdmanet.io/rdma-netns-mode"

	// NamespaceLabelEnforce set to "true" on a namespace makes the
	// validating webhook refuse every RDMA pod there that breaks an
	// error-level rule, opted in or not (elsewhere only opted-in pods are
	// refused; the others are admitted with the findings as warnings).
	NamespaceLabelEnforce = "rdmanet.io/enforce"

	// NetworksAnnotation is Multus' networks annotation.
	NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"
)

// Modes of the opt-in.
const (
	ModeExclusive = lint.ModeExclusive
	ModeShared    = lint.ModeShared
	ModeHost      = lint.ModeHost
)

// NetworkRef names a NetworkAttachmentDefinition.
type NetworkRef struct{ Namespace, Name string }

func (r NetworkRef) String() string { return r.Namespace + "/" + r.Name }

// OptIn is what a pod's rdmanet.io/ annotations ask for.
type OptIn struct {
	// Mode is ModeHost, or the asserted mode of the network ("" = the NAD's).
	Mode         string
	Network      NetworkRef // empty for ModeHost
	Resource     string
	Container    string
	Interface    string
	SocketIfname string
}

// ParseOptIn reads the opt-in annotations of a pod in namespace ns (the
// request's namespace: a pod being created may not carry one). nil, nil:
// the pod does not opt in. Errors name the annotation, its value and the fix.
func ParseOptIn(pod *corev1.Pod, ns string) (*OptIn, error) {
	a := pod.Annotations
	netVal, hasNet := a[AnnotationNetwork]
	modeVal, hasMode := a[AnnotationMode]
	if !hasNet && !hasMode {
		return nil, nil
	}
	bad := func(key, val, rule, fix string) error {
		return fmt.Errorf("annotation %s: %q %s; %s", key, val, rule, fix)
	}
	o := &OptIn{
		Mode:         strings.TrimSpace(modeVal),
		Resource:     strings.TrimSpace(a[AnnotationResource]),
		Container:    strings.TrimSpace(a[AnnotationContainer]),
		Interface:    strings.TrimSpace(a[AnnotationInterface]),
		SocketIfname: strings.TrimSpace(a[AnnotationSocketIfname]),
	}
	switch o.Mode {
	case "", ModeExclusive, ModeShared, ModeHost:
	default:
		return nil, bad(AnnotationMode, modeVal, "is not a mode", "use host (with "+AnnotationResource+"), or exclusive/shared next to "+AnnotationNetwork+", or remove it")
	}
	if o.Mode == ModeHost {
		if hasNet {
			return nil, bad(AnnotationNetwork, netVal, "is set on a hostNetwork (mode host) pod; no CNI runs for hostNetwork pods", "remove "+AnnotationNetwork+", or remove "+AnnotationMode+": host to attach the network")
		}
		if o.Interface != "" {
			return nil, bad(AnnotationInterface, o.Interface, "is set on a hostNetwork (mode host) pod, which gets no interface", "remove it; set "+AnnotationSocketIfname+" to the node's interface instead")
		}
	} else {
		v := strings.TrimSpace(netVal)
		if !hasNet || v == "" {
			return nil, bad(AnnotationNetwork, netVal, "is missing or empty (mode "+o.Mode+" attaches a network)", "set "+AnnotationNetwork+": <namespace>/<nad-name>")
		}
		ref := NetworkRef{Namespace: ns, Name: v}
		if i := strings.IndexByte(v, '/'); i >= 0 {
			ref.Namespace, ref.Name = v[:i], v[i+1:]
		}
		if len(validation.IsDNS1123Subdomain(ref.Name)) > 0 || (ref.Namespace != "" && len(validation.IsDNS1123Label(ref.Namespace)) > 0) {
			return nil, bad(AnnotationNetwork, netVal, "is not [<namespace>/]<nad-name> (one network)", "name one NetworkAttachmentDefinition, e.g. ai-training/face-training-rdma")
		}
		o.Network = ref
		if o.SocketIfname != "" {
			return nil, bad(AnnotationSocketIfname, o.SocketIfname, "is for hostNetwork pods; a pod on "+AnnotationNetwork+" gets NCCL_SOCKET_IFNAME for its RDMA interface", "remove it")
		}
		if o.Interface == "" {
			o.Interface = "net1"
		}
		if len(validation.IsDNS1123Label(o.Interface)) > 0 || len(o.Interface) > 15 {
			return nil, bad(AnnotationInterface, o.Interface, "is not an interface name", "use a short name such as net1")
		}
	}
	if o.Resource != "" && (!strings.Contains(o.Resource, "/") || len(validation.IsQualifiedName(o.Resource)) > 0) {
		return nil, bad(AnnotationResource, o.Resource, "is not an extended resource name <domain>/<name>", "use the device plugin pool's resource, e.g. rdma/rdma_shared_device_eth")
	}
	if o.Container != "" {
		found := false
		for _, c := range pod.Spec.Containers {
			found = found || c.Name == o.Container
		}
		if !found {
			return nil, bad(AnnotationContainer, o.Container, "names no container of the pod", "use one of "+containerNames(pod))
		}
	}
	return o, nil
}

func containerNames(pod *corev1.Pod) string {
	var n []string
	for _, c := range pod.Spec.Containers {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}
