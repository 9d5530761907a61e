package doctor

// The NIC layer: the node's RDMA devices and their functions (devices),
// their links and link layers (link) and SR-IOV (sriov).

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// ---- devices ----

func (c *checker) devices() {
	names, by := c.allDevices()
	if len(names) == 0 {
		c.add(IDRDMADevices, Fail, fmt.Sprintf("no RDMA device under %s (class/infiniband of the PCI functions): NCCL cannot use IB/RoCE here and falls back to TCP sockets", c.sysfs()),
			"on a node: load the RDMA drivers (modprobe mlx5_ib ib_uverbs, or install the vendor driver stack) and check `ibv_devices`; in a pod: request the RDMA extended resource (VF pool for exclusive, shared HCA pool for shared/host) and, for exclusive, chain the rdma CNI after sriov")
	} else {
		var pf []string
		vfs := 0
		for _, n := range names {
			if by[n].IsVF {
				vfs++
				continue
			}
			pf = append(pf, n)
		}
		msg := fmt.Sprintf("%d RDMA device(s): %s", len(names), strings.Join(pf, ", "))
		if vfs > 0 {
			if len(pf) == 0 {
				msg = fmt.Sprintf("%d RDMA device(s) of SR-IOV VFs: %s", vfs, strings.Join(names, ", "))
			} else {
				msg += fmt.Sprintf(" and %d of SR-IOV VFs", vfs)
			}
		}
		c.add(IDRDMADevices, Pass, msg, "")
	}

	var missing []string
	n := 0
	for _, f := range c.subjects() {
		for _, d := range f.RDMA {
			n++
			if f.Netdev() == "" {
				missing = append(missing, fmt.Sprintf("%s (%s)", d.Name, f.BDF))
			}
		}
	}
	podIf := ""
	for nd := range c.in.Netdevs {
		if netN.MatchString(nd) {
			podIf = nd
		}
	}
	switch {
	case len(missing) > 0 && len(missing) == n && podIf != "":
		c.add(IDIbdev2netdev, Pass, fmt.Sprintf("no RDMA device has its netdev here, but %s exists: a pod in shared netns mode (the HCAs' netdevs stay in the host netns; %s carries the pod's address)", podIf, podIf), "")
	case len(missing) > 0:
		c.add(IDIbdev2netdev, Warn, fmt.Sprintf("RDMA device(s) without a netdev in this network namespace: %s; NCCL_SOCKET_IFNAME, RoCE GIDs and IPAM need the netdev", strings.Join(missing, ", ")),
			"check the function's driver (ethtool/`ip link`); on InfiniBand load ib_ipoib for the IPoIB netdev; a netdev moved into another namespace is only visible there")
	case n > 0:
		c.add(IDIbdev2netdev, Pass, fmt.Sprintf("all %d RDMA device(s) have their netdev (see ibdev2netdev)", n), "")
	}

	probs := c.inventoryProblems()
	if len(probs) == 0 {
		c.add(IDInventory, Pass, fmt.Sprintf("%d PCI network function(s) read from %s", len(c.node.Functions), c.sysfs()), "")
	}
	for _, p := range probs {
		c.add(IDInventory, Warn, p, "re-run doctor; if it persists, check the device's driver binding (`lspci -k`) and `dmesg`")
	}
}

func (c *checker) inventoryProblems() []string {
	var out []string
	for _, p := range c.node.Problems {
		if strings.HasPrefix(p, "RDMA netns mode unknown") || strings.HasPrefix(p, "--rdma-netns-mode=") {
			continue // reported by rdma-netns-mode
		}
		out = append(out, p)
	}
	return out
}

func (c *checker) sysfs() string {
	if c.in.SysfsRoot == "" {
		return "/sys"
	}
	return c.in.SysfsRoot
}

// ---- link ----

func (c *checker) link() {
	ports := portsOf(c.subjects())
	for _, p := range ports {
		switch st := p.port.State; st {
		case "ACTIVE":
			c.add(IDPortState, Pass, fmt.Sprintf("%s: ACTIVE, %s", p.name(), linkName(p.port.LinkLayer)), "")
		case "":
			c.add(IDPortState, Warn, fmt.Sprintf("%s: port state unreadable", p.name()), "check <sysfs>/class/infiniband/"+p.dev.Name+"/ports/"+strconv.Itoa(p.port.Num)+"/state and `ibstat "+p.dev.Name+"`")
		default:
			fix := "check the cable/transceiver and the switch port (`ibstat " + p.dev.Name + "`"
			if nd := p.f.Netdev(); nd != "" {
				fix += ", `ethtool " + nd + "`"
			}
			fix += ")"
			if p.port.LinkLayer == inventory.LinkInfiniBand && (st == "INIT" || st == "ARMED") {
				fix = "the physical link is up but no subnet manager has brought the port to ACTIVE: run opensm on the fabric or enable the switch's SM (`sminfo`, `ibstat " + p.dev.Name + "`)"
			}
			c.add(IDPortState, Fail, fmt.Sprintf("%s is %s, not ACTIVE: no RDMA traffic passes this port; NCCL fails or skips it", p.name(), st), fix)
		}
	}

	for _, f := range c.subjects() {
		nd := f.Netdev()
		if nd == "" {
			continue
		}
		who := fmt.Sprintf("%s (%s)", nd, f.RDMAName())
		switch {
		case !f.AdminUp:
			c.add(IDNetdevState, Fail, who+" is administratively down: no RoCE/IPoIB traffic, no IPv4 GID", "ip link set "+nd+" up (and persist it in the node's network config)")
		case f.OperState != "up":
			st := f.OperState
			if st == "" {
				st = "unknown"
			}
			c.add(IDNetdevState, Fail, fmt.Sprintf("%s is up but its operstate is %s (no carrier)", who, st), "check the cable and switch port (`ethtool "+nd+"`, `ip -d link show "+nd+"`)")
		default:
			c.add(IDNetdevState, Pass, who+" is up", "")
		}
	}

	byLL := map[string][]string{}
	var unknown []string
	for _, p := range ports {
		ll := p.port.LinkLayer
		if ll != inventory.LinkEthernet && ll != inventory.LinkInfiniBand {
			unknown = append(unknown, fmt.Sprintf("%s port %d (%q)", p.dev.Name, p.port.Num, ll))
			continue
		}
		byLL[ll] = appendUniq(byLL[ll], p.dev.Name)
	}
	if len(unknown) > 0 {
		c.add(IDLinkLayer, Warn, "link layer unreadable or unknown for "+strings.Join(unknown, ", "),
			"check `ibstat` (Link layer: Ethernet → RoCE, InfiniBand → IB); on VPI adapters set the port type with the vendor tool (mlxconfig LINK_TYPE_P1)")
	} else if len(ports) > 0 {
		var parts []string
		if d := byLL[inventory.LinkEthernet]; len(d) > 0 {
			parts = append(parts, "RoCE (Ethernet): "+strings.Join(d, ", "))
		}
		if d := byLL[inventory.LinkInfiniBand]; len(d) > 0 {
			parts = append(parts, "InfiniBand: "+strings.Join(d, ", ")+" (macvlan/shared-HCA pods cannot use these; IPoIB or VFs instead)")
		}
		c.add(IDLinkLayer, Pass, strings.Join(parts, "; "), "")
	}
}

func linkName(ll string) string {
	switch ll {
	case inventory.LinkEthernet:
		return "RoCE"
	case inventory.LinkInfiniBand:
		return "InfiniBand"
	}
	return "link layer " + strconv.Quote(ll)
}

// ---- sriov ----

func (c *checker) sriov() {
	for _, f := range c.node.Functions {
		if f.IsVF || f.TotalVFs == 0 {
			continue
		}
		who := fmt.Sprintf("%s (%s, %s)", orDash(f.Netdev()), f.BDF, orDash(f.RDMAName()))
		if f.NumVFs == 0 {
			c.add(IDSRIOVVFs, Warn, fmt.Sprintf("%s is SR-IOV capable (up to %d VFs) but has no VFs enabled: an exclusive (VF) pool on it is empty", who, f.TotalVFs),
				fmt.Sprintf("echo N > /sys/bus/pci/devices/%s/sriov_numvfs (N ≤ %d; or numVfs in a SriovNetworkNodePolicy); ignore if this PF serves a shared or host pool", f.BDF, f.TotalVFs))
			continue
		}
		var noRDMA, inPods int
		for _, vb := range f.VFs {
			vf := c.node.Function(vb)
			if vf == nil {
				continue
			}
			switch {
			case f.HasRDMA() && !vf.HasRDMA() && vf.Netdev() != "":
				noRDMA++
			case !vf.HasRDMA() && vf.Netdev() == "":
				inPods++
			}
		}
		switch {
		case len(f.VFs) < f.NumVFs:
			c.add(IDSRIOVVFs, Warn, fmt.Sprintf("%s: sriov_numvfs is %d but only %d VF(s) are present in sysfs", who, f.NumVFs, len(f.VFs)),
				"VF creation failed or is still in progress: check `dmesg` for the PF's driver, then re-write sriov_numvfs (0, then N)")
		case noRDMA > 0:
			c.add(IDSRIOVVFs, Warn, fmt.Sprintf("%s: %d of %d VF(s) have a netdev here but no RDMA device: they cannot serve RDMA pods", who, noRDMA, f.NumVFs),
				"load the RDMA driver for the VFs (mlx5_ib) and make sure the VFs are bound to mlx5_core (not vfio-pci); `rdma link` should list them")
		default:
			msg := fmt.Sprintf("%s: %d/%d VFs enabled", who, f.NumVFs, f.TotalVFs)
			if inPods > 0 {
				msg += fmt.Sprintf(", %d not visible in this netns (assigned to pods)", inPods)
			}
			c.add(IDSRIOVVFs, Pass, msg, "")
		}
	}
}
