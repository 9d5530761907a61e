package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
)

// item is one network of an ADD besides the cluster network, resolved but
// not yet given its device.
type item struct {
	network  string // namespace/name of the NAD, or the config name
	ifname   string
	list     *libcni.NetworkConfigList
	resource string     // the NAD's resourceName
	sel      *Selection // nil for defaultNetworks
	deviceID string
	claim    *ClaimDevice // the DRA claim device deviceID came from
}

// attachments resolves the networks of a pod besides the cluster network:
// defaultNetworks first (unless the pod is in a systemNamespace), then the
// entries of its networks annotation, each with the device kubelet
// allocated for its NAD's resource.
func (p *Plugin) attachments(ctx context.Context, pod *corev1.Pod) ([]*Delegate, error) {
	podKey := pod.Namespace + "/" + pod.Name
	var items []*item
	reserved := map[string]bool{}
	if !slices.Contains(p.Conf.SystemNamespaces, pod.Namespace) {
		// Multus numbering: defaultNetworks get net1, net2, ... and the
		// annotation's entries continue after them
		for i, name := range p.Conf.DefaultNetworks {
			l, nad, err := p.resolveAdminNetwork(ctx, name)
			if err != nil {
				return nil, atStep(ReasonNetwork, fmt.Errorf("pod %s: defaultNetworks[%d] %q: %w", podKey, i, name, err))
			}
			it := &item{network: l.Name, ifname: fmt.Sprintf("net%d", i+1), list: l}
			if nad != nil {
				it.network = nad.Namespace + "/" + nad.Name
				it.resource = nad.Annotations[ResourceNameAnnotation]
			}
			reserved[it.ifname] = true
			items = append(items, it)
		}
	}
	sels, err := parseNetworks(pod.Annotations[NetworksAnnotation], pod.Namespace, podKey, reserved)
	if err != nil {
		return nil, atStep(ReasonNetwork, err)
	}
	for i := range sels {
		s := &sels[i]
		if p.Conf.NamespaceIsolation && s.Namespace != pod.Namespace && !p.Conf.IsGlobal(s.Namespace) {
			return nil, atStep(ReasonNetwork, fmt.Errorf("pod %s: network %s refused by namespaceIsolation (on by default): a pod may use NADs of its own namespace (%s) and of globalNamespaces (%s) only; fix: create the NAD in %s, add %s to globalNamespaces, or set \"namespaceIsolation\": false",
				podKey, s.Key(), pod.Namespace, strings.Join(p.Conf.GlobalNamespaces, ","), pod.Namespace, s.Namespace))
		}
		actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
		nad, err := p.Source.NAD(actx, s.Namespace, s.Name)
		cancel()
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, atStep(ReasonNetwork, fmt.Errorf("pod %s: annotation %s names network %s, but NetworkAttachmentDefinition %s does not exist; fix: create it, or correct the name/namespace in the annotation", podKey, NetworksAnnotation, s.Key(), s.Key()))
			}
			return nil, atStep(ReasonNetwork, fmt.Errorf("pod %s: %w", podKey, err))
		}
		raw, err := nadConfig(nad, p.Conf.ConfDir)
		if err != nil {
			return nil, atStep(ReasonNetwork, fmt.Errorf("pod %s: %w", podKey, err))
		}
		l, err := confList(raw, nad.Name, p.Conf.CNIVersion)
		if err != nil {
			return nil, atStep(ReasonNetwork, fmt.Errorf("pod %s: NetworkAttachmentDefinition %s: %w", podKey, s.Key(), err))
		}
		items = append(items, &item{network: s.Key(), ifname: s.Interface, list: l, resource: nad.Annotations[ResourceNameAnnotation], sel: s})
	}
	if err := p.assignDevices(ctx, pod, items); err != nil {
		return nil, atStep(ReasonDevice, err)
	}
	out := make([]*Delegate, 0, len(items))
	for _, it := range items {
		d := &Delegate{Network: it.network, IfName: it.ifname, Resource: it.resource, DeviceID: it.deviceID, Claim: it.claim, CapabilityArgs: map[string]any{}}
		var cniArgs map[string]any
		if s := it.sel; s != nil {
			if s.MAC != "" {
				d.CapabilityArgs["mac"] = s.MAC
				d.CNIArgs = append(d.CNIArgs, [2]string{"MAC", s.MAC})
			}
			if len(s.IPs) > 0 {
				d.CapabilityArgs["ips"] = s.IPs
			}
			if s.InfinibandGUID != "" {
				d.CapabilityArgs["infinibandGUID"] = s.InfinibandGUID
			}
			if len(s.PortMappings) > 0 {
				d.CapabilityArgs["portMappings"] = s.PortMappings
			}
			if s.Bandwidth != nil {
				d.CapabilityArgs["bandwidth"] = s.Bandwidth
			}
			for _, gw := range s.DefaultRoute {
				d.DefaultRoute = append(d.DefaultRoute, gw.String())
			}
			cniArgs = s.CNIArgs
		}
		if d.DeviceID != "" {
			d.CapabilityArgs["deviceID"] = d.DeviceID
		}
		conf, err := injectChain(it.list, d.DeviceID, cniArgs)
		if err != nil {
			return nil, atStep(ReasonNetwork, fmt.Errorf("pod %s: %w", podKey, err))
		}
		d.Conf = conf
		out = append(out, d)
	}
	return out, nil
}

// podResourcesAttempts bounds the PodResources calls of one ADD. Kubelet
// answers them from memory, so a call that runs out of its own apiTimeout
// while the ADD still has time is a starved kubelet (a burst of pod starts
// on a busy node), not a missing answer: it is asked again rather than
// failing the pod's sandbox.
const podResourcesAttempts = 3

// podDevices asks PodResources for the devices of pod namespace/name, each
// call bounded by apiTimeout, again after a call that timed out while ctx
// (the ADD's own deadline) has not ended, at most podResourcesAttempts
// times.
func (p *Plugin) podDevices(ctx context.Context, namespace, name string) (*Allocation, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, p.Conf.APITimeoutDur)
		alloc, err := p.Devices.PodDevices(actx, namespace, name)
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		switch {
		case err == nil:
			return alloc, nil
		case !timedOut:
			return nil, err
		case attempt == podResourcesAttempts:
			return nil, fmt.Errorf("%w (%d calls, each bounded by apiTimeout %v: kubelet did not answer; fix: check kubelet's load and its pod-resources socket, or raise apiTimeout)", err, attempt, p.Conf.APITimeoutDur)
		}
		p.Log.Warn("kubelet PodResources call timed out; asking again", "pod", namespace+"/"+name, "attempt", attempt, "of", podResourcesAttempts, "timeout", p.Conf.APITimeoutDur, "err", err)
	}
}

// assignDevices gives every item whose NAD has a resourceName a device that
// kubelet allocated to the pod for that resource (PodResources: a device
// plugin device, or a DRA claim device whose ResourceSlice names that
// resource, see ClaimDeviceResolver): the one the
// annotation's "deviceID" names, which must be among them, else the next
// one not taken, in kubelet's order. A pod can write its own annotation, so
// it may choose among its own devices only, never another pod's or a free
// one; and only for a NAD with a resourceName, since otherwise there is no
// allocation to check the choice against.
func (p *Plugin) assignDevices(ctx context.Context, pod *corev1.Pod, items []*item) error {
	podKey := pod.Namespace + "/" + pod.Name
	var need bool
	for _, it := range items {
		if it.sel != nil && it.sel.DeviceID != "" && it.resource == "" {
			return fmt.Errorf("pod %s: network %s (%s) asks for deviceID %q in the %s annotation, but NetworkAttachmentDefinition %s has no %s annotation: there is no kubelet allocation to check the device against, and a pod may not pick a device itself; fix: remove \"deviceID\" from the annotation, or give the NAD the resourceName of its device plugin pool and request that resource in the pod",
				podKey, it.network, it.ifname, it.sel.DeviceID, NetworksAnnotation, it.network, ResourceNameAnnotation)
		}
		need = need || it.resource != ""
	}
	if !need {
		return nil
	}
	if p.Devices == nil {
		return fmt.Errorf("pod %s: networks need devices of %s but no PodResources client is configured", podKey, resourcesOf(items))
	}
	alloc, err := p.podDevices(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return fmt.Errorf("pod %s: %w", podKey, err)
	}
	devs := alloc.Devices
	defer func() {
		for _, it := range items {
			if cd, ok := alloc.Claims[it.deviceID]; ok && it.deviceID != "" {
				it.claim = &cd
			}
		}
	}()
	taken := map[string]string{} // device -> network that has it
	for _, it := range items {
		if it.resource == "" || it.sel == nil || it.sel.DeviceID == "" {
			continue
		}
		id, allowed := it.sel.DeviceID, devs[it.resource]
		if !slices.Contains(allowed, id) {
			list := "none"
			if len(allowed) > 0 {
				list = strings.Join(allowed, ", ")
			}
			return fmt.Errorf("pod %s: network %s (%s) asks for deviceID %q in the %s annotation, but that device is not among those kubelet allocated to the pod for resource %q (the NAD's %s): allowed devices: %s; a pod may pick only among its own devices; fix: remove \"deviceID\" from the annotation (the device then comes from kubelet's allocation) or name one of the allowed devices",
				podKey, it.network, it.ifname, id, NetworksAnnotation, it.resource, ResourceNameAnnotation, list)
		}
		if other, ok := taken[id]; ok {
			return fmt.Errorf("pod %s: networks %s and %s both ask for deviceID %q in the %s annotation; fix: give each attachment its own device", podKey, other, it.network, id, NetworksAnnotation)
		}
		taken[id] = it.network
		it.deviceID = id
	}
	next := map[string]int{}
	for _, it := range items {
		if it.resource == "" || it.deviceID != "" {
			continue
		}
		ids := devs[it.resource]
		for next[it.resource] < len(ids) && taken[ids[next[it.resource]]] != "" {
			next[it.resource]++
		}
		if next[it.resource] >= len(ids) {
			wanted := 0
			for _, o := range items {
				if o.resource == it.resource {
					wanted++
				}
			}
			return fmt.Errorf("pod %s: NetworkAttachmentDefinition %s needs a device of resource %q (its %s annotation), but kubelet allocated the pod %d such device(s) for %d attachment(s); the pod requests: %s; its DRA claims: %s. The resource name must match in three places: the device plugin pool, the NAD annotation and the pod's resources; fix: request %s in the pod's resources (limits and requests), one per attachment, or, with DRA, a claim whose device class selects devices of pool %s (docs/dra.md \"Attachment\")",
				podKey, it.network, it.resource, ResourceNameAnnotation, len(ids), wanted, requestedExtended(pod), claimsOf(pod, alloc), it.resource, it.resource)
		}
		it.deviceID = ids[next[it.resource]]
		taken[it.deviceID] = it.network
		next[it.resource]++
	}
	return nil
}

func resourcesOf(items []*item) string {
	var rs []string
	for _, it := range items {
		if it.resource != "" && !slices.Contains(rs, it.resource) {
			rs = append(rs, it.resource)
		}
	}
	return strings.Join(rs, ", ")
}

// claimsOf describes the pod's DRA claims and what came of their devices,
// for the error of a NAD that found no device.
func claimsOf(pod *corev1.Pod, alloc *Allocation) string {
	var parts []string
	for _, c := range pod.Spec.ResourceClaims {
		parts = append(parts, c.Name)
	}
	if len(parts) == 0 {
		return "none"
	}
	s := strings.Join(parts, ", ")
	if len(alloc.Unresolved) > 0 {
		s += " (devices not used for networks: " + strings.Join(alloc.Unresolved, "; ") + ")"
	}
	return s
}
