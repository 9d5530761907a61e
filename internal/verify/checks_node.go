package verify

// The node layer: the RDMA extended resource on the pod's node (node-resource).

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

func (c *checker) node() {
	const L = LayerNode
	if len(c.resources) == 0 {
		if claims := draClaims(c.pod); len(claims) > 0 && c.mode != ModeHost {
			c.add(L, IDNodeResource, OK, fmt.Sprintf("pod %s requests no RDMA extended resource; it gets devices through DRA ResourceClaims %s (kubectl get resourceclaim -n %s -o yaml shows what each got)", c.podRef(), strings.Join(claims, ", "), c.pod.Namespace), "")
			return
		}
		switch c.mode {
		case ModeExclusive, ModeShared:
			c.add(L, IDNodeResource, Problem, fmt.Sprintf("pod %s (%s mode) requests no RDMA extended resource in its containers' limits", c.podRef(), c.mode),
				"add the pool's resource to resources.limits of the training container (e.g. example.com/sriov_rdma: 1 or rdma/hca_shared_devices_a: 1): without it no VF or /dev/infiniband reaches the pod")
		default:
			c.add(L, IDNodeResource, Skip, "the pod requests no RDMA extended resource", "")
		}
		return
	}
	if c.pod.Spec.NodeName == "" {
		c.add(L, IDNodeResource, Problem, fmt.Sprintf("pod %s is not scheduled (no spec.nodeName)", c.podRef()), "kubectl describe pod: the scheduler's event says which resource no node offers")
		return
	}
	if c.f.NodeErr != nil || c.f.Node == nil {
		c.add(L, IDNodeResource, Unknown, fmt.Sprintf("node %s: %v", c.pod.Spec.NodeName, c.f.NodeErr), "check that the node exists and that you may get nodes")
		return
	}
	n := c.f.Node
	for _, res := range slices.Sorted(maps.Keys(c.resources)) {
		if claim := extendedClaim(c.pod, res); claim != "" {
			// a node serving the resource through DRA only reports it with
			// 0 allocatable; kube-scheduler made this claim for it
			c.add(L, IDNodeResource, OK, fmt.Sprintf("%s (%d) is served through DRA: extended-resource ResourceClaim %s/%s", res, c.resources[res], c.pod.Namespace, claim), "")
			continue
		}
		rn := corev1.ResourceName(res)
		capQ, hasCap := n.Status.Capacity[rn]
		allocQ, hasAlloc := n.Status.Allocatable[rn]
		alloc := allocQ.Value()
		used, usedStr := int64(0), "?"
		if c.f.NodePodsErr == nil {
			for _, p := range c.f.NodePods {
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				for _, ctr := range p.Spec.Containers {
					if q, ok := ctr.Resources.Limits[rn]; ok {
						used += q.Value()
					}
				}
			}
			usedStr = fmt.Sprint(used)
		}
		ev := fmt.Sprintf("node %s: %s capacity %d, allocatable %d, allocated %s (pods on the node); this pod requests %d", n.Name, res, capQ.Value(), alloc, usedStr, c.resources[res])
		switch {
		case !hasCap && !hasAlloc:
			c.add(L, IDNodeResource, Problem, fmt.Sprintf("node %s does not offer %s at all (not in capacity/allocatable); this pod requests %d", n.Name, res, c.resources[res]),
				"the device plugin (rdmanet-agent) does not run on the node or has no pool named "+res+": check its DaemonSet pod and its pool configuration; the name must match the pod's limits and the NAD's resourceName")
		case alloc == 0:
			c.add(L, IDNodeResource, Problem, ev+": nothing allocatable", "the pool's devices are gone or unhealthy: kubectl rdma doctor on the node (VFs enabled? ports ACTIVE?), and the agent's log")
		case c.f.NodePodsErr == nil && used > alloc:
			c.add(L, IDNodeResource, Problem, ev+": more allocated than allocatable (devices vanished under running pods)", "the pool shrank (VFs disabled, port down): kubectl rdma doctor on the node; restart the pods once the devices are back")
		default:
			c.add(L, IDNodeResource, OK, ev, "")
		}
	}
}

// extendedClaim is the claim kube-scheduler made for the pod's extended
// resource res when the node serves it through DRA, "" otherwise.
func extendedClaim(pod *corev1.Pod, res string) string {
	x := pod.Status.ExtendedResourceClaimStatus
	if x == nil || x.ResourceClaimName == "" {
		return ""
	}
	for _, m := range x.RequestMappings {
		if string(m.ResourceName) == res {
			return x.ResourceClaimName
		}
	}
	return ""
}
