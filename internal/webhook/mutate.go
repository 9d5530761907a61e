package webhook

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
)

// NAD is what mutation needs to know about a NetworkAttachmentDefinition.
type NAD struct {
	Ref NetworkRef
	// ResourceName is its k8s.v1.cni.cncf.io/resourceName annotation.
	ResourceName string
	// Mode is lint's classification of the plugin chain (exclusive,
	// shared, or "" for a network that is not an RDMA network).
	Mode string
	// Plugins are the plugin types of the chain, for messages.
	Plugins []string
}

// NADFromManifest converts a decoded NAD.
func NADFromManifest(n *manifest.NAD) *NAD {
	out := &NAD{Ref: NetworkRef{Namespace: n.Namespace, Name: n.Name}, ResourceName: n.ResourceName, Mode: lint.NADMode(n)}
	for _, p := range n.Config.PluginsOrEmpty() {
		out.Plugins = append(out.Plugins, p.Type)
	}
	return out
}

// Mutate gives pod what its opt-in mode needs, in place, and never changes
// what the user set: the networks annotation, the RDMA resource in requests
// and limits of the training container, IPC_LOCK, node affinity to nodes
// whose RDMA netns mode fits, NCCL environment, and for mode host
// hostNetwork and dnsPolicy ClusterFirstWithHostNet. Mutating a mutated pod
// changes nothing. nad is the resolved AnnotationNetwork (nil for mode host).
// An error is a denial: it names the annotation or field, the value and the fix.
func Mutate(pod *corev1.Pod, o *OptIn, nad *NAD) (warnings []string, err error) {
	mode := o.Mode
	if mode != ModeHost {
		if nad == nil {
			return nil, fmt.Errorf("annotation %s: %q: NetworkAttachmentDefinition not resolved", AnnotationNetwork, o.Network)
		}
		if nad.Mode == "" {
			return nil, fmt.Errorf("annotation %s: %q: NetworkAttachmentDefinition %s is not an RDMA network (plugins: %s); rdmanet attaches sriov (exclusive VF) or macvlan/ipvlan (shared HCA) networks; point the annotation at one, or attach this network with %s yourself", AnnotationNetwork, pod.Annotations[AnnotationNetwork], nad.Ref, strings.Join(nad.Plugins, ", "), NetworksAnnotation)
		}
		if mode != "" && mode != nad.Mode {
			return nil, fmt.Errorf("annotation %s: %q, but NetworkAttachmentDefinition %s is a %s network (plugins: %s); remove %s or point %s at a %s network", AnnotationMode, mode, nad.Ref, nad.Mode, strings.Join(nad.Plugins, ", "), AnnotationMode, AnnotationNetwork, mode)
		}
		mode = nad.Mode
		if pod.Spec.HostNetwork {
			return nil, fmt.Errorf("annotation %s: %q on a pod with spec.hostNetwork: true; no CNI runs for hostNetwork pods, the network would never appear (lint rule RDMA022); remove hostNetwork, or use %s: host instead of %s", AnnotationNetwork, pod.Annotations[AnnotationNetwork], AnnotationMode, AnnotationNetwork)
		}
	}
	ctr := trainingContainer(pod, o)

	// Networks annotation and the interface NCCL uses.
	iface := o.Interface
	if mode != ModeHost {
		iface, err = ensureNetworks(pod, o, nad)
		if err != nil {
			return nil, err
		}
	}

	// RDMA device resource.
	res := o.Resource
	if res == "" && nad != nil {
		res = nad.ResourceName
	}
	switch {
	case hasRDMAResource(ctr) && !hasResource(ctr, res):
		// The user chose a device resource: left alone (the validating
		// webhook checks it against the NAD, rule RDMA010).
	case res != "":
		setResource(ctr, res)
	default:
		where := fmt.Sprintf("NetworkAttachmentDefinition %s has no %s annotation and the pod no %s annotation", o.Network, manifest.ResourceNameAnnotation, AnnotationResource)
		fix := fmt.Sprintf("annotate the pod %s: <pool resource> (e.g. rdma/rdma_shared_device_eth), or the NAD %s", AnnotationResource, manifest.ResourceNameAnnotation)
		if mode == ModeHost {
			where = fmt.Sprintf("a hostNetwork RDMA pod needs a shared RDMA pool resource for /dev/infiniband, and the pod has no %s annotation", AnnotationResource)
			fix = fmt.Sprintf("annotate the pod %s: <shared pool resource> (e.g. rdma/rdma_shared_device_eth), or request it in container %q's limits", AnnotationResource, ctr.Name)
		}
		return nil, fmt.Errorf("container %q requests no RDMA device resource: %s; %s", ctr.Name, where, fix)
	}

	addIPCLock(ctr)
	if mode == ModeHost {
		pod.Spec.HostNetwork = true
		if pod.Spec.DNSPolicy == "" || pod.Spec.DNSPolicy == corev1.DNSClusterFirst {
			pod.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
		}
	}
	requireNodeLabel(pod, mode)

	// NCCL environment: only variables the user did not set.
	env := []corev1.EnvVar{{Name: "NCCL_IB_DISABLE", Value: "0"}}
	switch {
	case mode != ModeHost:
		env = append(env, corev1.EnvVar{Name: "NCCL_SOCKET_IFNAME", Value: "=" + iface})
	case o.SocketIfname != "":
		env = append(env, corev1.EnvVar{Name: "NCCL_SOCKET_IFNAME", Value: o.SocketIfname})
	default:
		warnings = append(warnings, fmt.Sprintf("rdmanet: NCCL_SOCKET_IFNAME not set for hostNetwork pod: the webhook cannot know the node's interface on the RDMA NIC; set it in container %q or annotate the pod %s: <interface>", ctr.Name, AnnotationSocketIfname))
	}
	if len(ctr.EnvFrom) > 0 {
		var names []string
		for _, e := range env {
			if !hasEnv(ctr, e.Name) {
				names = append(names, e.Name+"="+e.Value)
			}
		}
		if len(names) > 0 {
			warnings = append(warnings, fmt.Sprintf("rdmanet: container %q takes variables from envFrom, which the webhook cannot read, so it added no NCCL variables (an env entry would override envFrom); make sure it sets %s", ctr.Name, strings.Join(names, ", ")))
		}
		return warnings, nil
	}
	for _, e := range env {
		if !hasEnv(ctr, e.Name) {
			ctr.Env = append(ctr.Env, e)
		}
	}
	return warnings, nil
}

func trainingContainer(pod *corev1.Pod, o *OptIn) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == o.Container {
			return &pod.Spec.Containers[i]
		}
	}
	return &pod.Spec.Containers[0]
}

// ensureNetworks adds the NAD to the networks annotation unless it is
// there; it returns the in-pod interface of the attachment.
func ensureNetworks(pod *corev1.Pod, o *OptIn, nad *NAD) (string, error) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	cur, has := pod.Annotations[NetworksAnnotation]
	if !has || strings.TrimSpace(cur) == "" {
		sel := map[string]string{"name": nad.Ref.Name, "namespace": nad.Ref.Namespace, "interface": o.Interface}
		b, err := json.Marshal([]map[string]string{sel})
		if err != nil {
			return "", err
		}
		pod.Annotations[NetworksAnnotation] = string(b)
		return o.Interface, nil
	}
	sels, err := manifest.ParseNetworks(NetworksAnnotation, cur)
	if err != nil {
		return "", fmt.Errorf("annotation %s: %q: %v; fix the annotation, or remove it and let %s attach the network", NetworksAnnotation, cur, err, AnnotationNetwork)
	}
	for _, s := range sels {
		ns := s.Namespace
		if ns == "" {
			ns = pod.Namespace
		}
		if s.Name == nad.Ref.Name && (ns == nad.Ref.Namespace || ns == "") {
			return s.Interface, nil
		}
	}
	return "", fmt.Errorf("annotation %s: %q does not attach %s, which %s names; the webhook does not rewrite a networks annotation the pod brings: add %s to it, or remove it", NetworksAnnotation, cur, nad.Ref, AnnotationNetwork, nad.Ref)
}

func setResource(c *corev1.Container, name string) {
	rn := corev1.ResourceName(name)
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	lim, hasLim := c.Resources.Limits[rn]
	req, hasReq := c.Resources.Requests[rn]
	switch {
	case hasLim && !hasReq:
		c.Resources.Requests[rn] = lim.DeepCopy()
	case hasReq && !hasLim:
		c.Resources.Limits[rn] = req.DeepCopy()
	case !hasLim && !hasReq:
		c.Resources.Limits[rn] = resource.MustParse("1")
		c.Resources.Requests[rn] = resource.MustParse("1")
	}
}

func hasRDMAResource(c *corev1.Container) bool {
	for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for n := range l {
			if lint.IsRDMAResource(string(n)) {
				return true
			}
		}
	}
	return false
}

func hasResource(c *corev1.Container, name string) bool {
	_, l := c.Resources.Limits[corev1.ResourceName(name)]
	_, r := c.Resources.Requests[corev1.ResourceName(name)]
	return l || r
}

func addIPCLock(c *corev1.Container) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	sc := c.SecurityContext
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{}
	}
	for _, cp := range sc.Capabilities.Add {
		switch strings.ToUpper(strings.TrimPrefix(string(cp), "CAP_")) {
		case "IPC_LOCK", "ALL":
			return
		}
	}
	sc.Capabilities.Add = append(sc.Capabilities.Add, "IPC_LOCK")
}

// netnsModes are the node label values a pod of a mode can run on: a VF's
// RDMA device can be moved into a pod only in exclusive mode, a shared HCA
// is visible in every pod only in shared mode; a hostNetwork pod uses the
// host's devices in either.
func netnsModes(mode string) []string {
	switch mode {
	case ModeExclusive:
		return []string{"exclusive"}
	case ModeShared:
		return []string{"shared"}
	}
	return []string{"exclusive", "shared"}
}

// requireNodeLabel adds a required node affinity term on NodeLabelNetnsMode
// to every node selector term (terms are ORed) that does not already say
// something about the label.
func requireNodeLabel(pod *corev1.Pod, mode string) {
	req := corev1.NodeSelectorRequirement{Key: NodeLabelNetnsMode, Operator: corev1.NodeSelectorOpIn, Values: netnsModes(mode)}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}}
		return
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		has := false
		for _, e := range terms[i].MatchExpressions {
			has = has || e.Key == NodeLabelNetnsMode
		}
		if !has {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
		}
	}
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
