package verify

// The pod layer: what exec shows inside the container (interface, route, RDMA device, GID, memlock, NCCL_* env).

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rdmanet/rdmanet/internal/lint"
)

// capIPCLock is the bit of CAP_IPC_LOCK in CapEff.
const capIPCLock = 14

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
	c.ibPort()
	c.ibPKey()
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
		if c.ibOnly[ifn] {
			oks = append(oks, fmt.Sprintf("IB-only device %s: no net1 (the function has no netdev; the pod has its RDMA device alone, NCCL bootstraps over eth0)", ifn))
			continue
		}
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
	ibOnly := len(c.trainIfs) > 0
	for _, ifn := range c.trainIfs {
		ibOnly = ibOnly && c.ibOnly[ifn]
	}
	switch {
	case ibOnly && len(bad) == 0:
		c.add(L, IDDefaultRoute, OK, "IB-only device "+strings.Join(c.trainIfs, ",")+": no net1, so no route over it", "")
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
			if c.ibOnly[d.Name] {
				onIf = append(onIf, d.Name+" (IB-only, no netdev)")
			}
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
			if d.Name == c.rdmaDev || c.ibOnly[d.Name] {
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
		c.allIB = true
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
		var own, ownSel []string
		if c.onIB() {
			for _, d := range c.podHCAs() {
				own = append(own, d.Name)
				if lint.FilterSelects(hca, d.Name) {
					ownSel = append(ownSel, d.Name)
				}
			}
		}
		switch {
		case len(sel) == 0:
			c.add(L, IDNCCLIBHCA, Problem, fmt.Sprintf("NCCL_IB_HCA=%s selects no RDMA device of the pod (has: %s)", hca, orNone(v.DeviceNames())),
				"set it to a device the pod has (ls /sys/class/infiniband), or unset it; device names differ between nodes and modes (a VF is not mlx5_0)")
		case len(own) > 0 && len(ownSel) == 0:
			c.add(L, IDNCCLIBHCA, Problem, fmt.Sprintf("NCCL_IB_HCA=%s selects %s, not the pod's HCA %s (the device of its InfiniBand network %s): NCCL sends on a port whose partition and GUID are not the pod's", hca, strings.Join(sel, ", "), strings.Join(own, ", "), c.ibNets[0].key),
				"set NCCL_IB_HCA to the pod's HCA ("+own[0]+") or unset it in exclusive mode; in a shared IPoIB pod name the HCA behind the ipoib master")
		case len(ownSel) > 0:
			c.add(L, IDNCCLIBHCA, OK, fmt.Sprintf("NCCL_IB_HCA=%s selects %s, the pod's HCA %s", hca, strings.Join(sel, ", "), strings.Join(ownSel, ", ")), "")
		default:
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
	case c.allIB && set && gv != "":
		c.add(L, IDNCCLGIDIndex, OK, "NCCL_IB_GID_INDEX="+gv+" is ignored on InfiniBand (IB addresses ports by LID; no GID index is needed): harmless, and may be dropped", "")
	case c.allIB:
		c.add(L, IDNCCLGIDIndex, OK, "unset: InfiniBand needs no GID index", "")
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
