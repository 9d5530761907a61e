package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/manifest"
	"github.com/rdmanet/rdmanet/internal/nccl"
)

// NetworkStatusAnnotation is the Multus network-status annotation.
const NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"

// capIPCLock is the bit of CAP_IPC_LOCK in CapEff.
const capIPCLock = 14

// Run performs every check over f. It does no I/O.
func Run(f *Facts) *Report {
	c := &checker{f: f, pod: f.Pod}
	c.rep = &Report{Namespace: c.pod.Namespace, Pod: c.pod.Name, Node: c.pod.Spec.NodeName, Container: f.Container, ModeEvidence: []string{}, Checks: []Check{}}
	c.prepare()
	c.node()
	c.network()
	c.inPod()
	c.ncclLog()
	c.rep.summarise()
	return c.rep
}

type checker struct {
	f    *Facts
	pod  *corev1.Pod
	rep  *Report
	mode string

	sels    []manifest.NetworkSelection
	selsErr error
	// status is the parsed network-status annotation.
	status    []nadv1.NetworkStatus
	statusErr error
	// trainIfs are the in-pod names of the secondary networks.
	trainIfs []string
	// trainIPs are the IPs network-status gives them.
	trainIPs map[string][]string
	// rdmaDev is the device-info's rdma-device (exclusive mode).
	rdmaDev string
	// resources are the RDMA resources the pod's containers request.
	resources map[string]int64

	view *PodView
}

func (c *checker) add(layer, id string, st Status, evidence, fix string) {
	if st == OK || st == Skip {
		fix = ""
	}
	c.rep.Checks = append(c.rep.Checks, Check{Layer: layer, ID: id, Status: st, Evidence: evidence, Fix: fix})
}

func (c *checker) host() bool { return c.pod.Spec.HostNetwork }

func (c *checker) podRef() string { return c.pod.Namespace + "/" + c.pod.Name }

func (c *checker) prepare() {
	mode, ev, err := DetectMode(c.pod, c.f.NADs)
	if err != nil {
		ev = append(ev, err.Error())
	}
	c.mode = mode
	c.rep.Mode = mode
	if ev != nil {
		c.rep.ModeEvidence = ev
	}
	c.sels, c.selsErr = Selections(c.pod)
	c.trainIPs = map[string][]string{}
	if v, ok := c.pod.Annotations[NetworkStatusAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &c.status); err != nil {
			c.statusErr = fmt.Errorf("annotation %s: %w", NetworkStatusAnnotation, err)
		}
	}
	for _, s := range c.sels {
		ifn := s.Interface
		if st := c.statusOf(s); st != nil {
			if st.Interface != "" {
				ifn = st.Interface
			}
			c.trainIPs[ifn] = st.IPs
			if st.DeviceInfo != nil && st.DeviceInfo.Pci != nil && c.rdmaDev == "" {
				c.rdmaDev = st.DeviceInfo.Pci.RdmaDevice
			}
		}
		if ifn != "" && !contains(c.trainIfs, ifn) {
			c.trainIfs = append(c.trainIfs, ifn)
		}
	}
	var nadRes []string
	for _, n := range c.f.NADs {
		if n != nil && n.ResourceName != "" {
			nadRes = append(nadRes, n.ResourceName)
		}
	}
	c.resources = map[string]int64{}
	for _, ctr := range c.pod.Spec.Containers {
		for k, v := range rdmaLimits(ctr, nadRes) {
			c.resources[k] += v
		}
	}
	if c.f.ExecErr == nil && c.f.Exec != nil {
		c.view = ParsePodView(c.f.Exec)
	}
}

func (c *checker) statusOf(s manifest.NetworkSelection) *nadv1.NetworkStatus {
	for i := range c.status {
		st := &c.status[i]
		if st.Name == s.Namespace+"/"+s.Name || (st.Name == s.Name && s.Namespace == c.pod.Namespace) {
			if s.InterfaceExplicit && st.Interface != "" && st.Interface != s.Interface {
				continue
			}
			return st
		}
	}
	return nil
}

func (c *checker) secondary() bool { return !c.host() && len(c.sels) > 0 }

// ---- node layer ----

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
	for _, res := range sortedKeys(c.resources) {
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

// ---- network-status layer ----

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
			probs = append(probs, fmt.Sprintf("NAD %s has resourceName %s but the pod does not request it (it requests: %s)", key, n.ResourceName, orNone(sortedKeys(c.resources))))
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

// ---- pod layer ----

var podChecks = []string{IDTrainingIf, IDDefaultRoute, IDRDMADevice, IDDevInfiniband, IDRoCEGID, IDMemlock, IDCapIPCLock, IDNCCLTransport, IDNCCLIBHCA, IDNCCLSocketIfname, IDNCCLGIDIndex}

func (c *checker) inPod() {
	const L = LayerPod
	if c.view == nil {
		why := "no exec output"
		if c.f.ExecErr != nil {
			why = c.f.ExecErr.Error()
		}
		fix := "the container must run and have busybox sh (ip, ls, cat, grep, tr); you need create on pods/exec"
		if c.pod.Status.Phase != corev1.PodRunning {
			fix = fmt.Sprintf("the pod is %s: exec needs a running container", orDash(string(c.pod.Status.Phase)))
		}
		c.add(L, IDExec, Unknown, fmt.Sprintf("exec into %s container %s: %s", c.podRef(), orDash(c.f.Container), why), fix)
		return
	}
	c.add(L, IDExec, OK, fmt.Sprintf("exec into container %s: %d interfaces, %d RDMA devices, env from %s", c.f.Container, len(c.view.Links), len(c.view.Devices), c.view.EnvSource), "")
	c.trainingIf()
	c.defaultRoute()
	c.rdmaDevice()
	c.devInfiniband()
	gidIdx := c.roceGID()
	c.memlock()
	c.ncclEnv(gidIdx)
}

func (c *checker) trainingIf() {
	const L = LayerPod
	if !c.secondary() {
		c.add(L, IDTrainingIf, Skip, "no secondary network ("+c.modeWhy()+")", "")
		return
	}
	v := c.view
	var oks, probs []string
	for _, ifn := range c.trainIfs {
		l, ok := v.Link(ifn)
		if !ok {
			probs = append(probs, fmt.Sprintf("the pod has no %s (interfaces: %s)", ifn, strings.Join(v.LinkNames(), ", ")))
			continue
		}
		have := v.AddrsOf(ifn)
		var lack []string
		for _, ip := range c.trainIPs[ifn] {
			if !contains(have, ip) {
				lack = append(lack, ip)
			}
		}
		switch {
		case !l.Up():
			probs = append(probs, fmt.Sprintf("%s is down (flags %s)", ifn, strings.Join(l.Flags, ",")))
		case !l.Carrier():
			probs = append(probs, fmt.Sprintf("%s is up but has no carrier (flags %s)", ifn, strings.Join(l.Flags, ",")))
		case len(lack) > 0:
			probs = append(probs, fmt.Sprintf("%s lacks %s that network-status lists (has: %s)", ifn, strings.Join(lack, ","), orNone(have)))
		case len(have) == 0:
			probs = append(probs, fmt.Sprintf("%s is up without an address", ifn))
		default:
			oks = append(oks, fmt.Sprintf("%s up with %s", ifn, strings.Join(have, ",")))
		}
	}
	if len(probs) > 0 {
		c.add(L, IDTrainingIf, Problem, strings.Join(append(probs, oks...), "; "),
			"the secondary network was not (fully) attached: kubectl describe pod (events, RDMANetAttachFailed), the meta-CNI's log on the node; the pod must be recreated once the NAD/CNI is fixed")
		return
	}
	c.add(L, IDTrainingIf, OK, strings.Join(oks, "; "), "")
}

func (c *checker) modeWhy() string {
	if c.host() {
		return "hostNetwork pod"
	}
	return "no networks annotation"
}

func (c *checker) defaultRoute() {
	const L = LayerPod
	if !c.secondary() {
		c.add(L, IDDefaultRoute, Skip, "no secondary network ("+c.modeWhy()+")", "")
		return
	}
	var defs, bad []string
	for _, r := range c.view.Routes {
		if !r.IsDefault() {
			continue
		}
		d := "default dev " + r.Dev
		if r.Via != "" {
			d = "default via " + r.Via + " dev " + r.Dev
		}
		defs = append(defs, d)
		if contains(c.trainIfs, r.Dev) {
			bad = append(bad, d)
		}
	}
	switch {
	case len(bad) > 0:
		c.add(L, IDDefaultRoute, Problem, "the default route goes over the training interface: "+strings.Join(bad, "; ")+"; pod traffic (DNS, API server, storage) leaves over the RDMA network",
			"drop \"gateway\" and any 0.0.0.0/0 entry from the NAD's ipam routes (keep only the training subnet) and no \"default-route\" in the networks annotation; recreate the pod")
	case len(defs) == 0:
		c.add(L, IDDefaultRoute, OK, "no default route in the pod (none over "+strings.Join(c.trainIfs, ",")+")", "")
	default:
		c.add(L, IDDefaultRoute, OK, strings.Join(defs, "; ")+" (not the training interface "+strings.Join(c.trainIfs, ",")+")", "")
	}
}

func (c *checker) rdmaDevice() {
	const L = LayerPod
	v := c.view
	if len(v.Devices) == 0 {
		fix := "the node's RDMA driver is not loaded or no RDMA device exists: kubectl rdma doctor on the node"
		switch {
		case c.mode == ModeExclusive:
			fix = "the VF's RDMA device was not moved into the pod: the NAD's chain needs the rdma plugin after sriov, and the node's RDMA subsystem must be in exclusive netns mode (rdma system set netns exclusive)"
		case c.mode == ModeShared:
			fix = "shared HCA pods see the HCA only when the node's RDMA subsystem is in shared netns mode (rdma system set netns shared); exclusive mode hides it"
		}
		c.add(L, IDRDMADevice, Problem, "no RDMA device under /sys/class/infiniband in the pod", fix)
		return
	}
	desc := describeDevices(v.Devices)
	if c.mode == ModeExclusive {
		if c.rdmaDev != "" && !contains(v.DeviceNames(), c.rdmaDev) {
			c.add(L, IDRDMADevice, Problem, fmt.Sprintf("network-status says the VF's RDMA device is %s but the pod sees %s", c.rdmaDev, desc),
				"the rdma CNI step did not move the VF's device: check the NAD chain (sriov → rdma) and the node's RDMA netns mode (exclusive)")
			return
		}
		var onIf []string
		for _, d := range v.Devices {
			for _, nd := range d.Netdevs {
				if contains(c.trainIfs, nd) {
					onIf = append(onIf, d.Name+" ("+nd+")")
				}
			}
		}
		if len(c.trainIfs) == 0 {
			c.add(L, IDRDMADevice, OK, "pod sees "+desc, "")
			return
		}
		if len(onIf) == 0 {
			c.add(L, IDRDMADevice, Problem, fmt.Sprintf("no RDMA device of the pod belongs to %s (devices: %s)", strings.Join(c.trainIfs, ","), desc),
				"the VF's netdev and RDMA device must both be in the pod: check the NAD chain (sriov → rdma)")
			return
		}
		c.add(L, IDRDMADevice, OK, "exclusive VF device "+strings.Join(onIf, ", ")+" visible; pod sees "+desc, "")
		return
	}
	c.add(L, IDRDMADevice, OK, "pod sees "+desc, "")
}

func describeDevices(ds []IBDevice) string {
	var out []string
	for _, d := range ds {
		s := d.Name
		var ps []string
		for _, p := range d.Ports {
			ps = append(ps, fmt.Sprintf("port %d %s %s", p.Num, orDash(p.LinkLayer), orDash(p.State)))
		}
		if len(d.Netdevs) > 0 {
			ps = append(ps, "netdev "+strings.Join(d.Netdevs, ","))
		}
		if len(ps) > 0 {
			s += " [" + strings.Join(ps, "; ") + "]"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func (c *checker) devInfiniband() {
	const L = LayerPod
	var uverbs []string
	for _, n := range c.view.DevNodes {
		if strings.HasPrefix(n, "uverbs") {
			uverbs = append(uverbs, n)
		}
	}
	if len(uverbs) == 0 {
		fix := "request the RDMA resource in the container's limits: the device plugin mounts /dev/infiniband/uverbsN and rdma_cm at Allocate"
		if c.host() {
			fix = "hostNetwork pods still need the device nodes: request the shared pool's resource (e.g. rdma/hca_shared_devices_a: 1) or mount /dev/infiniband"
		}
		c.add(LayerPod, IDDevInfiniband, Problem, "no uverbs node in /dev/infiniband (has: "+orNone(c.view.DevNodes)+"): verbs cannot open the device", fix)
		return
	}
	c.add(LayerPod, IDDevInfiniband, OK, "/dev/infiniband: "+strings.Join(c.view.DevNodes, " "), "")
}

// selectedDevices are the devices NCCL would use: NCCL_IB_HCA's, else the
// VF's in exclusive mode, else all. When NCCL_IB_HCA selects nothing (nccl-ib-hca reports it), the
// GID checks look at the devices NCCL should have been given.
func (c *checker) selectedDevices() []IBDevice {
	v := c.view
	if hca := strings.TrimSpace(v.Env["NCCL_IB_HCA"]); hca != "" {
		var out []IBDevice
		for _, d := range v.Devices {
			if lint.FilterSelects(hca, d.Name) {
				out = append(out, d)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	if c.mode == ModeExclusive {
		var out []IBDevice
		for _, d := range v.Devices {
			if d.Name == c.rdmaDev {
				out = append(out, d)
				continue
			}
			for _, nd := range d.Netdevs {
				if contains(c.trainIfs, nd) {
					out = append(out, d)
					break
				}
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return v.Devices
}

// roceGID reports the RoCEv2 IPv4 GID of the selected RoCE ports; it
// returns the index they share (-1: none, or they differ).
func (c *checker) roceGID() int {
	const L = LayerPod
	var trainIPs []string
	for _, ifn := range c.trainIfs {
		trainIPs = append(trainIPs, c.view.AddrsOf(ifn)...)
	}
	idx := map[int][]string{}
	var found, probs, ib []string
	for _, d := range c.selectedDevices() {
		for _, p := range d.Ports {
			subj := fmt.Sprintf("%s port %d", d.Name, p.Num)
			if !p.RoCE() {
				ib = append(ib, subj)
				continue
			}
			var v4 []GID
			for _, g := range p.GIDs {
				if g.RoCEv2IPv4() {
					v4 = append(v4, g)
				}
			}
			var pick *GID
			if len(trainIPs) > 0 && c.secondary() {
				for i := range v4 {
					if contains(trainIPs, v4[i].IPv4) {
						pick = &v4[i]
						break
					}
				}
			} else if len(v4) > 0 {
				pick = &v4[0]
			}
			if pick == nil {
				if len(v4) > 0 {
					probs = append(probs, fmt.Sprintf("%s: no RoCEv2 GID carries %s's address %s (RoCEv2 IPv4 GIDs: %s)", subj, strings.Join(c.trainIfs, ","), strings.Join(trainIPs, ","), gidList(v4)))
				} else {
					probs = append(probs, fmt.Sprintf("%s: no RoCEv2 IPv4 GID (%d GIDs populated)", subj, len(p.GIDs)))
				}
				continue
			}
			idx[pick.Index] = append(idx[pick.Index], subj)
			found = append(found, fmt.Sprintf("%s: RoCEv2 IPv4 GID index %d = %s (%s)", subj, pick.Index, pick.IPv4, orDash(pick.Netdev)))
		}
	}
	switch {
	case len(probs) > 0:
		c.add(L, IDRoCEGID, Problem, strings.Join(append(probs, found...), "; "),
			"the training netdev needs its IPv4 address for the kernel to add the RoCEv2 GID: check net1's address (IPAM); in shared mode the macvlan must sit on the RoCE PF")
		return -1
	case len(found) == 0 && len(ib) > 0:
		c.add(L, IDRoCEGID, Skip, "InfiniBand ports ("+strings.Join(ib, ", ")+"): no GID index needed", "")
		return -1
	case len(found) == 0:
		c.add(L, IDRoCEGID, Skip, "no RDMA port selected", "")
		return -1
	}
	c.add(L, IDRoCEGID, OK, strings.Join(found, "; "), "")
	if len(idx) != 1 {
		return -1
	}
	for k := range idx {
		return k
	}
	return -1
}

func gidList(gs []GID) string {
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%d=%s", g.Index, g.IPv4))
	}
	return strings.Join(out, " ")
}

func (c *checker) memlock() {
	const L = LayerPod
	v := c.view
	ipcLock := v.CapKnown && v.CapEff&(1<<capIPCLock) != 0
	unl, kib, err := memlockKiB(v.Memlock)
	switch {
	case err != nil:
		c.add(L, IDMemlock, Unknown, err.Error(), "")
	case unl:
		c.add(L, IDMemlock, OK, "ulimit -l: unlimited", "")
	case ipcLock:
		c.add(L, IDMemlock, OK, fmt.Sprintf("ulimit -l: %d KiB, lifted by CAP_IPC_LOCK", kib), "")
	default:
		c.add(L, IDMemlock, Problem, fmt.Sprintf("ulimit -l: %d KiB without CAP_IPC_LOCK: memory registration (ibv_reg_mr) fails beyond it", kib),
			"add IPC_LOCK to the container's securityContext.capabilities.add (or raise the runtime's memlock limit to unlimited)")
	}
	switch {
	case !v.CapKnown:
		c.add(L, IDCapIPCLock, Unknown, "no CapEff line in /proc/self/status", "")
	case ipcLock:
		c.add(L, IDCapIPCLock, OK, fmt.Sprintf("CapEff %016x has CAP_IPC_LOCK (bit %d)", v.CapEff, capIPCLock), "")
	default:
		c.add(L, IDCapIPCLock, Problem, fmt.Sprintf("CapEff %016x lacks CAP_IPC_LOCK (bit %d)", v.CapEff, capIPCLock),
			fmt.Sprintf("add IPC_LOCK to spec.containers[%s].securityContext.capabilities.add", orDash(c.f.Container)))
	}
}

func (c *checker) ncclEnv(gidIdx int) {
	const L = LayerPod
	v := c.view
	env := v.Env
	src := " (" + v.EnvSource + ")"
	// transport
	switch {
	case env["NCCL_IB_DISABLE"] == "1":
		c.add(L, IDNCCLTransport, Problem, "NCCL_IB_DISABLE=1"+src+": NCCL uses TCP sockets", "unset NCCL_IB_DISABLE (or set 0)")
	case strings.EqualFold(env["NCCL_NET"], "Socket"):
		c.add(L, IDNCCLTransport, Problem, "NCCL_NET=Socket"+src+": NCCL uses TCP sockets", "unset NCCL_NET (or set IB)")
	default:
		c.add(L, IDNCCLTransport, OK, "NCCL_IB_DISABLE/NCCL_NET leave IB on"+src, "")
	}
	// NCCL_IB_HCA
	if hca, ok := env["NCCL_IB_HCA"]; ok && strings.TrimSpace(hca) != "" {
		var sel []string
		for _, d := range v.Devices {
			if lint.FilterSelects(hca, d.Name) {
				sel = append(sel, d.Name)
			}
		}
		if len(sel) == 0 {
			c.add(L, IDNCCLIBHCA, Problem, fmt.Sprintf("NCCL_IB_HCA=%s selects no RDMA device of the pod (has: %s)", hca, orNone(v.DeviceNames())),
				"set it to a device the pod has (ls /sys/class/infiniband), or unset it; device names differ between nodes and modes (a VF is not mlx5_0)")
		} else {
			c.add(L, IDNCCLIBHCA, OK, fmt.Sprintf("NCCL_IB_HCA=%s selects %s", hca, strings.Join(sel, ", ")), "")
		}
	} else {
		c.add(L, IDNCCLIBHCA, OK, "unset: NCCL uses every visible device ("+orNone(v.DeviceNames())+")", "")
	}
	// NCCL_SOCKET_IFNAME
	if ifn, ok := env["NCCL_SOCKET_IFNAME"]; ok && strings.TrimSpace(ifn) != "" {
		var sel []string
		for _, n := range v.LinkNames() {
			if lint.FilterSelects(ifn, n) {
				sel = append(sel, n)
			}
		}
		if len(sel) == 0 {
			want := "net1 (the NAD's interface)"
			if len(c.trainIfs) > 0 {
				want = c.trainIfs[0]
			}
			if c.host() {
				want = "the node's NIC"
			}
			c.add(L, IDNCCLSocketIfname, Problem, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects no interface of the pod (has: %s): NCCL bootstrap fails", ifn, strings.Join(v.LinkNames(), ", ")),
				"set NCCL_SOCKET_IFNAME="+want+"; =name matches exactly, ^ excludes, otherwise prefixes")
		} else {
			c.add(L, IDNCCLSocketIfname, OK, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects %s", ifn, strings.Join(sel, ", ")), "")
		}
	} else {
		c.add(L, IDNCCLSocketIfname, OK, "unset: NCCL picks the bootstrap interface itself (ib* first, then any but lo/docker*)", "")
	}
	// NCCL_IB_GID_INDEX
	gv, set := env["NCCL_IB_GID_INDEX"]
	gv = strings.TrimSpace(gv)
	switch {
	case gidIdx < 0 && !set:
		c.add(L, IDNCCLGIDIndex, Skip, "unset, and no single RoCEv2 IPv4 index to compare (see roce-gid)", "")
	case gidIdx < 0:
		c.add(L, IDNCCLGIDIndex, Skip, "NCCL_IB_GID_INDEX="+gv+": no single RoCEv2 IPv4 index to compare (see roce-gid)", "")
	case !set || gv == "":
		c.add(L, IDNCCLGIDIndex, OK, fmt.Sprintf("unset: NCCL ≥ 2.21 finds the RoCEv2 GID itself; older NCCL needs NCCL_IB_GID_INDEX=%d", gidIdx), "")
	case gv == fmt.Sprint(gidIdx):
		c.add(L, IDNCCLGIDIndex, OK, fmt.Sprintf("NCCL_IB_GID_INDEX=%s is the RoCEv2 IPv4 index", gv), "")
	default:
		c.add(L, IDNCCLGIDIndex, Problem, fmt.Sprintf("NCCL_IB_GID_INDEX=%s but the RoCEv2 IPv4 GID is at index %d: NCCL initialises but cross-node connections time out or crawl", gv, gidIdx),
			fmt.Sprintf("set NCCL_IB_GID_INDEX=%d (or unset it with NCCL ≥ 2.21); do not copy the index from another node or mode", gidIdx))
	}
}

// ---- nccl layer ----

func (c *checker) ncclLog() {
	const L = LayerNCCL
	if !c.f.LogsWanted {
		c.add(L, IDNCCLLog, Skip, "--nccl-logs not given", "")
		return
	}
	if c.f.LogsErr != nil {
		c.add(L, IDNCCLLog, Unknown, fmt.Sprintf("logs of %s container %s: %v", c.podRef(), orDash(c.f.Container), c.f.LogsErr), "you need get on pods/log")
		return
	}
	rep, err := nccl.Parse([]string{"pod/" + c.pod.Name}, []io.Reader{strings.NewReader(c.f.Logs)})
	if err != nil {
		c.add(L, IDNCCLLog, Unknown, "NCCL log: "+err.Error(), "")
		return
	}
	gdr := "no"
	if rep.GDR {
		gdr = "yes"
	}
	desc := fmt.Sprintf("transport %s, HCAs %s, OOB %s, GPUDirect RDMA %s", rep.Transport, orNone(rep.HCAs), orNone(rep.OOB), gdr)
	var errs, fixes []string
	for _, p := range rep.Problems {
		if p.Severity == "error" {
			errs = append(errs, p.Message)
			if p.Fix != "" {
				fixes = append(fixes, p.Fix)
			}
		}
	}
	switch {
	case len(errs) > 0:
		c.add(L, IDNCCLLog, Problem, desc+": "+strings.Join(errs, "; "), strings.Join(fixes, "; "))
	case rep.Transport == nccl.TransportIB:
		c.add(L, IDNCCLLog, OK, "NCCL used NET/IB: "+desc, "")
	default:
		c.add(L, IDNCCLLog, Unknown, "no NET/ transport line in the log ("+desc+")", "run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (and read the log before it rotates)")
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// draClaims lists the ResourceClaims the pod's status names: its own and
// template-generated ones, and the one kube-scheduler made for extended
// resources served through DRA.
func draClaims(pod *corev1.Pod) []string {
	var out []string
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil && *st.ResourceClaimName != "" {
			out = append(out, *st.ResourceClaimName)
		}
	}
	if x := pod.Status.ExtendedResourceClaimStatus; x != nil && x.ResourceClaimName != "" {
		out = append(out, x.ResourceClaimName)
	}
	return out
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
