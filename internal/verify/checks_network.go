package verify

// The network layer: the NADs and the network-status annotation (nad-exists, nad-resource, network-status, device-info).

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

func (c *checker) network() {
	const L = LayerNetwork
	if c.host() {
		for _, id := range []string{IDNADExists, IDNADResource, IDNetworkStatus, IDDeviceInfo} {
			c.add(L, id, Skip, "hostNetwork pod: no secondary network (the pod uses the node's NICs)", "")
		}
		return
	}
	if c.selsErr != nil {
		c.add(L, IDNADExists, Problem, c.selsErr.Error(), "fix the annotation: a JSON list of {\"name\",\"namespace\",\"interface\"} or \"[ns/]name[@if]\" items")
		return
	}
	if len(c.sels) == 0 {
		switch c.mode {
		case ModeExclusive, ModeShared:
			c.add(L, IDNADExists, Problem, fmt.Sprintf("pod %s (%s mode) has no %s annotation: it gets the RDMA device but no net1", c.podRef(), c.mode, manifest.NetworksAnnotation),
				"add the annotation naming the RDMA NAD, e.g. k8s.v1.cni.cncf.io/networks: <namespace>/<nad>@net1, and recreate the pod")
		default:
			c.add(L, IDNADExists, Skip, "no "+manifest.NetworksAnnotation+" annotation: no secondary network", "")
		}
		for _, id := range []string{IDNADResource, IDNetworkStatus, IDDeviceInfo} {
			c.add(L, id, Skip, "no secondary network", "")
		}
		return
	}
	// nad-exists, nad-resource
	var exist, missing []string
	for _, s := range c.sels {
		key := s.Namespace + "/" + s.Name
		if c.f.NADErr != nil {
			continue
		}
		if c.f.NADs[key] == nil {
			missing = append(missing, key)
		} else {
			exist = append(exist, key)
		}
	}
	switch {
	case c.f.NADErr != nil:
		c.add(L, IDNADExists, Unknown, c.f.NADErr.Error(), "check that you may get network-attachment-definitions in the namespace")
	case len(missing) > 0:
		c.add(L, IDNADExists, Problem, fmt.Sprintf("NetworkAttachmentDefinition %s named by the networks annotation does not exist (any more): the running pod keeps its interface, but a restart or a new replica fails at sandbox creation", strings.Join(missing, ", ")),
			"recreate the NAD (kubectl apply the NAD manifest), or fix the name in the pod template's annotation")
	default:
		c.add(L, IDNADExists, OK, "NetworkAttachmentDefinition "+strings.Join(exist, ", ")+" exist(s)", "")
	}
	c.nadResource()
	c.networkStatus()
}

func (c *checker) nadResource() {
	const L = LayerNetwork
	if c.f.NADErr != nil {
		c.add(L, IDNADResource, Unknown, "NADs unreadable", "")
		return
	}
	var oks, probs []string
	for _, s := range c.sels {
		key := s.Namespace + "/" + s.Name
		n := c.f.NADs[key]
		if n == nil {
			continue
		}
		switch {
		case n.ResourceName == "" && c.mode == ModeExclusive:
			probs = append(probs, fmt.Sprintf("NAD %s has no %s annotation: the meta-CNI cannot find the VF the kubelet allocated (no deviceID)", key, manifest.ResourceNameAnnotation))
		case n.ResourceName == "":
			oks = append(oks, fmt.Sprintf("NAD %s has no resourceName (none needed in %s mode)", key, c.mode))
		case c.resources[n.ResourceName] > 0:
			oks = append(oks, fmt.Sprintf("NAD %s resourceName %s is requested by the pod (%d)", key, n.ResourceName, c.resources[n.ResourceName]))
		case len(draClaims(c.pod)) > 0:
			oks = append(oks, fmt.Sprintf("NAD %s resourceName %s: the pod's devices come from DRA ResourceClaims %s (the meta CNI takes the claim device whose ResourceSlice names that resource; device-info below shows which)", key, n.ResourceName, strings.Join(draClaims(c.pod), ", ")))
		default:
			probs = append(probs, fmt.Sprintf("NAD %s has resourceName %s but the pod does not request it (it requests: %s)", key, n.ResourceName, orNone(slices.Sorted(maps.Keys(c.resources)))))
		}
	}
	switch {
	case len(probs) > 0:
		c.add(L, IDNADResource, Problem, strings.Join(probs, "; "), "the resource name must match in three places: the device plugin pool, the NAD's k8s.v1.cni.cncf.io/resourceName and the container's resources.limits")
	case len(oks) > 0:
		c.add(L, IDNADResource, OK, strings.Join(oks, "; "), "")
	default:
		c.add(L, IDNADResource, Skip, "no NAD to compare", "")
	}
}

func (c *checker) networkStatus() {
	const L = LayerNetwork
	if _, ok := c.pod.Annotations[NetworkStatusAnnotation]; !ok {
		c.add(L, IDNetworkStatus, Problem, fmt.Sprintf("pod %s has no %s annotation: no meta-CNI (Multus / rdmanet) reported its attachments", c.podRef(), NetworkStatusAnnotation),
			"check that the node's CNI is the meta plugin (rdmanet or Multus) and the pod's events (RDMANetAttachFailed)")
		c.add(L, IDDeviceInfo, Skip, "no network-status", "")
		return
	}
	if c.statusErr != nil {
		c.add(L, IDNetworkStatus, Problem, c.statusErr.Error(), "the meta-CNI wrote an unreadable annotation: report it")
		c.add(L, IDDeviceInfo, Skip, "no network-status", "")
		return
	}
	var oks, probs []string
	for _, s := range c.sels {
		key := s.Namespace + "/" + s.Name
		st := c.statusOf(s)
		switch {
		case st == nil:
			probs = append(probs, fmt.Sprintf("network-status has no entry for %s (has: %s)", key, orNone(statusNames(c.status))))
		case c.ibOnly[st.Interface]:
			oks = append(oks, fmt.Sprintf("%s: IB-only device %s (no netdev, so no IPs)", key, st.Interface))
		case len(st.IPs) == 0:
			probs = append(probs, fmt.Sprintf("%s on %s has no IPs (RoCEv2 and NCCL's bootstrap need an IPv4 address)", key, orDash(st.Interface)))
		default:
			oks = append(oks, fmt.Sprintf("%s on %s with %s", key, orDash(st.Interface), strings.Join(st.IPs, ",")))
		}
	}
	if len(probs) > 0 {
		c.add(L, IDNetworkStatus, Problem, strings.Join(append(probs, oks...), "; "), "the attachment failed or its IPAM gave no address: kubectl describe pod (events), the NAD's ipam section, and the meta-CNI's log on the node")
	} else {
		c.add(L, IDNetworkStatus, OK, strings.Join(oks, "; "), "")
	}
	if c.mode != ModeExclusive {
		c.add(L, IDDeviceInfo, Skip, fmt.Sprintf("%s mode: no per-pod VF", c.mode), "")
		return
	}
	var di []string
	var missing []string
	for _, s := range c.sels {
		st := c.statusOf(s)
		if st == nil {
			continue
		}
		if st.DeviceInfo == nil || st.DeviceInfo.Pci == nil || st.DeviceInfo.Pci.PciAddress == "" {
			missing = append(missing, s.Namespace+"/"+s.Name)
			continue
		}
		d := st.DeviceInfo.Pci
		di = append(di, fmt.Sprintf("%s: VF pci-address %s, rdma-device %s", st.Interface, d.PciAddress, orDash(d.RdmaDevice)))
	}
	switch {
	case len(missing) > 0:
		c.add(L, IDDeviceInfo, Problem, "no device-info (pci-address) in network-status for "+strings.Join(missing, ", ")+": the attachment got no VF from the device plugin",
			"the NAD needs k8s.v1.cni.cncf.io/resourceName naming the VF pool and the pod must request that resource; see nad-resource")
	case len(di) > 0:
		c.add(L, IDDeviceInfo, OK, strings.Join(di, "; "), "")
	default:
		c.add(L, IDDeviceInfo, Skip, "no network-status entry to read", "")
	}
}

func statusNames(ss []nadv1.NetworkStatus) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}
