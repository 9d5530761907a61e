package doctor

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/lint"
)

// Run performs every check over in and returns the report. It does no I/O.
func Run(in *Input) *Report {
	c := &checker{in: in, node: in.Node}
	if c.node == nil {
		c.node = &inventory.Node{}
	}
	c.devices()
	c.link()
	c.ibPorts()
	c.netns()
	c.sriov()
	c.gid()
	c.dev()
	c.memlock()
	c.route()
	c.nccl()
	c.cni()
	rep := &Report{Checks: c.out, Node: nodeView(in)}
	for _, ch := range rep.Checks {
		switch ch.Status {
		case Pass:
			rep.Summary.Pass++
		case Warn:
			rep.Summary.Warn++
		case Fail:
			rep.Summary.Fail++
		}
	}
	rep.Summary.Result = string(Pass)
	if rep.Summary.Warn > 0 {
		rep.Summary.Result = string(Warn)
	}
	if rep.Summary.Fail > 0 {
		rep.Summary.Result = string(Fail)
	}
	return rep
}

type checker struct {
	in   *Input
	node *inventory.Node
	out  []Check
}

func (c *checker) add(id string, st Status, msg, fix string) {
	sec := ""
	for _, ci := range Catalogue {
		if ci.ID == id {
			sec = ci.Section
		}
	}
	if st == Pass {
		fix = ""
	}
	c.out = append(c.out, Check{ID: id, Section: sec, Status: st, Message: msg, Fix: fix})
}

// subjects are the functions whose devices are checked one by one: PFs and
// NICs without SR-IOV. VFs are summarised per PF, except where only VFs are
// visible (a pod with an exclusive VF).
func (c *checker) subjects() []*inventory.Function {
	var pfs, vfs []*inventory.Function
	for _, f := range c.node.Functions {
		if !f.HasRDMA() {
			continue
		}
		if f.IsVF {
			vfs = append(vfs, f)
		} else {
			pfs = append(pfs, f)
		}
	}
	if len(pfs) > 0 {
		return pfs
	}
	return vfs
}

// devicePort is one port of one RDMA device with its function.
type devicePort struct {
	f    *inventory.Function
	dev  inventory.RDMADevice
	port inventory.Port
}

func (d devicePort) name() string {
	s := fmt.Sprintf("%s port %d", d.dev.Name, d.port.Num)
	if nd := d.f.Netdev(); nd != "" {
		s += " (" + nd + ")"
	}
	return s
}

func portsOf(fs []*inventory.Function) []devicePort {
	var out []devicePort
	for _, f := range fs {
		for _, d := range f.RDMA {
			for _, p := range d.Ports {
				out = append(out, devicePort{f, d, p})
			}
		}
	}
	return out
}

// allDevices returns every visible RDMA device name with its function.
func (c *checker) allDevices() ([]string, map[string]*inventory.Function) {
	var names []string
	by := map[string]*inventory.Function{}
	for _, f := range c.node.Functions {
		for _, d := range f.RDMA {
			names = append(names, d.Name)
			by[d.Name] = f
		}
	}
	sort.Slice(names, func(i, j int) bool { return natLess(names[i], names[j]) })
	return names, by
}

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

// ---- netns ----

// EffectiveNetnsMode is the mode the checks use and where it came from.
func (in *Input) EffectiveNetnsMode() (mode, source string) {
	switch {
	case in.NetnsMode != "":
		return in.NetnsMode, "kernel"
	case in.NetnsModeFlag != "":
		return in.NetnsModeFlag, "--rdma-netns-mode"
	}
	return inventory.NetnsUnknown, "none"
}

func (c *checker) netns() {
	in := c.in
	const setFix = "`rdma system set netns exclusive` for SR-IOV VF pods (the rdma CNI moves each VF's RDMA device into its pod), `rdma system set netns shared` for shared-HCA (macvlan) and hostNetwork pods; persist it in /etc/modprobe.d with `options ib_core netns_mode=0` (exclusive) or `=1` (shared)"
	switch {
	case in.NetnsMode != "" && in.NetnsModeFlag != "" && in.NetnsModeFlag != in.NetnsMode:
		c.add(IDNetnsMode, Warn, fmt.Sprintf("--rdma-netns-mode=%s disagrees with the kernel, which reports %s; the kernel's mode is used", in.NetnsModeFlag, in.NetnsMode),
			"drop --rdma-netns-mode, or change the kernel's mode: "+setFix)
	case in.NetnsMode != "":
		c.add(IDNetnsMode, Pass, fmt.Sprintf("%s (kernel, `rdma system`)", in.NetnsMode), "")
	case in.NetnsModeFlag != "":
		msg := fmt.Sprintf("%s (stated by --rdma-netns-mode", in.NetnsModeFlag)
		if in.NetnsModeErr != nil {
			msg += "; the kernel could not be asked: " + in.NetnsModeErr.Error()
		}
		c.add(IDNetnsMode, Pass, msg+")", "")
	default:
		msg := "RDMA netns mode unknown: the kernel did not report it over RDMA netlink"
		if in.NetnsModeErr != nil {
			msg += " (" + in.NetnsModeErr.Error() + ")"
		}
		c.add(IDNetnsMode, Warn, msg+"; the netns-mode-fit check is skipped",
			"run `rdma system` on the node (needs the ib_core module: `modprobe ib_core`) and pass its answer with --rdma-netns-mode=exclusive|shared; to change it: "+setFix)
	}

	mode, _ := in.EffectiveNetnsMode()
	var vfRDMA, pfRDMA []string
	for _, f := range c.node.Functions {
		if !f.HasRDMA() {
			continue
		}
		if f.IsVF {
			vfRDMA = append(vfRDMA, f.RDMAName())
		} else if f.TotalVFs == 0 {
			pfRDMA = append(pfRDMA, f.RDMAName())
		}
	}
	switch mode {
	case inventory.NetnsExclusive:
		if len(vfRDMA) == 0 {
			c.add(IDNetnsFit, Warn, "netns mode exclusive but no SR-IOV VF has an RDMA device: there is nothing for the rdma CNI to move, and pods in their own netns (shared-HCA/macvlan) see no RDMA device at all",
				"for shared-HCA pods: `rdma system set netns shared`; for exclusive pods: enable VFs (sriov_numvfs) with the RDMA driver loaded")
			return
		}
		msg := fmt.Sprintf("exclusive: %d VF RDMA device(s) can be moved into pods by the rdma CNI", len(vfRDMA))
		if len(pfRDMA) > 0 {
			msg += fmt.Sprintf("; %s stay in the host netns (hostNetwork pods only, not macvlan pods)", strings.Join(pfRDMA, ", "))
		}
		c.add(IDNetnsFit, Pass, msg, "")
	case inventory.NetnsShared:
		if len(vfRDMA) > 0 {
			c.add(IDNetnsFit, Warn, fmt.Sprintf("netns mode shared but %d SR-IOV VF(s) have RDMA devices: the rdma CNI cannot move a VF's RDMA device into a pod in shared mode (exclusive pods fail at CNI ADD), and every pod sees every HCA", len(vfRDMA)),
				"for SR-IOV VF pods: `rdma system set netns exclusive` (while no RDMA device is in use) and keep shared-HCA pools on other nodes; otherwise disable the VFs (sriov_numvfs=0)")
			return
		}
		c.add(IDNetnsFit, Pass, "shared: every HCA is usable from every netns (shared-HCA macvlan pods, hostNetwork pods)", "")
	}
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

// ---- gid ----

func (c *checker) gid() {
	for _, p := range portsOf(c.subjects()) {
		if p.port.LinkLayer != inventory.LinkEthernet {
			continue
		}
		if idx, ok := p.port.RecommendedGIDIndex(); ok {
			ip := ""
			for _, g := range p.port.GIDs {
				if g.Index == idx {
					ip = g.IPv4
				}
			}
			c.add(IDRoCEGID, Pass, fmt.Sprintf("%s: RoCEv2 IPv4 GID at index %d (%s) → NCCL_IB_GID_INDEX=%d", p.name(), idx, ip, idx), "")
			continue
		}
		nd := orDash(p.f.Netdev())
		c.add(IDRoCEGID, Warn, fmt.Sprintf("%s: no RoCEv2 IPv4 GID (%d GID entries): %s has no IPv4 address, so RoCEv2 over IPv4 cannot address this port", p.name(), len(p.port.GIDs), nd),
			"assign the training network's IPv4 address to "+nd+" (in a pod the NAD's IPAM gives net1 one); then `show_gids` lists a v2 entry with an IPv4 address")
	}
}

// ---- dev ----

func (c *checker) dev() {
	var want, have, miss []string
	for _, f := range c.node.Functions {
		for _, d := range f.RDMA {
			for _, cd := range d.CharDevs {
				if !strings.Contains(cd, "/uverbs") {
					continue
				}
				want = append(want, cd)
				if c.in.DevNodes[cd] {
					have = append(have, cd)
				} else {
					miss = append(miss, fmt.Sprintf("%s (%s)", devPath(c.in.DevRoot, cd), d.Name))
				}
			}
		}
	}
	if len(want) == 0 {
		return
	}
	dir := devPath(c.in.DevRoot, "/dev/infiniband")
	switch {
	case len(have) == 0:
		msg := fmt.Sprintf("none of the %d uverbs node(s) of the RDMA devices exists under %s: verbs (NCCL, ib_write_bw) cannot open any HCA", len(want), dir)
		if c.in.DevListErr != nil {
			msg += " (" + c.in.DevListErr.Error() + ")"
		}
		c.add(IDDevInfiniband, Fail, msg,
			"on a node: modprobe ib_uverbs (and rdma_ucm); in a pod: request the RDMA extended resource so the device plugin mounts /dev/infiniband/uverbsN (privileged pods see /dev of the host)")
	case len(miss) > 0:
		c.add(IDDevInfiniband, Warn, fmt.Sprintf("%d of %d uverbs node(s) present; missing: %s", len(have), len(want), strings.Join(limit(miss, 6), ", ")),
			"expected in a pod that was given only some devices; on a node: check udev and `ls -l /dev/infiniband`; restrict NCCL_IB_HCA to the devices this pod has")
	default:
		c.add(IDDevInfiniband, Pass, fmt.Sprintf("all %d uverbs node(s) present under %s", len(want), dir), "")
	}
}

func devPath(root, p string) string {
	if root == "" || root == "/dev" {
		return p
	}
	return strings.TrimSuffix(root, "/") + strings.TrimPrefix(p, "/dev")
}

// ---- memlock ----

func (c *checker) memlock() {
	m, caps := c.in.Memlock, c.in.Caps
	const fix = "grant IPC_LOCK (securityContext.capabilities.add: [IPC_LOCK]) or lift the limit: containerd/CRI-O default_ulimits memlock=-1:-1, systemd LimitMEMLOCK=infinity, `ulimit -l unlimited`"
	switch {
	case !m.Known:
		c.add(IDMemlock, Warn, "RLIMIT_MEMLOCK unknown: "+orDash(m.Err), "check `ulimit -l` in the training container; "+fix)
	case m.Unlimited:
		c.add(IDMemlock, Pass, "unlimited ("+m.Source+")", "")
	case caps.IPCLock():
		c.add(IDMemlock, Pass, fmt.Sprintf("limited to %s (%s), but CAP_IPC_LOCK lifts the limit for memory registration", bytesStr(m.Soft), m.Source), "")
	default:
		c.add(IDMemlock, Fail, fmt.Sprintf("limited to %s (%s) without CAP_IPC_LOCK: memory registration (ibv_reg_mr pins pages with mlock) fails beyond it, and NCCL registers far more", bytesStr(m.Soft), m.Source), fix)
	}
	switch {
	case !caps.Known:
		c.add(IDCapIPCLock, Warn, "effective capabilities unknown: "+orDash(caps.Err), "check CapEff in /proc/<pid>/status (bit 14 is CAP_IPC_LOCK)")
	case caps.IPCLock():
		c.add(IDCapIPCLock, Pass, fmt.Sprintf("CAP_IPC_LOCK is effective (CapEff %016x, %s)", caps.CapEff, caps.Source), "")
	default:
		msg := fmt.Sprintf("CAP_IPC_LOCK is not effective (CapEff %016x, %s)", caps.CapEff, caps.Source)
		if m.Known && m.Unlimited {
			msg += ": registration works only while memlock stays unlimited"
		}
		c.add(IDCapIPCLock, Warn, msg, "add IPC_LOCK to the container: securityContext.capabilities.add: [\"IPC_LOCK\"] (no need for privileged)")
	}
}

// ---- route ----

var netN = regexp.MustCompile(`^net\d+$`)

func (c *checker) route() {
	in := c.in
	if in.RouteErr != nil {
		c.add(IDDefaultRoute, Warn, "routing table unreadable: "+in.RouteErr.Error(), "point --proc-root at the procfs of the node or pod (net/route)")
		return
	}
	if len(in.DefaultRouteLinks) == 0 {
		c.add(IDDefaultRoute, Pass, "no default route in this network namespace", "")
		return
	}
	hca, hcaSet := in.Env["NCCL_IB_HCA"]
	training := map[string]string{} // netdev -> why
	for _, t := range in.TrainingIfs {
		training[t] = "named by --training-if"
	}
	for nd := range in.Netdevs {
		if netN.MatchString(nd) {
			training[nd] = "a secondary pod interface (netN)"
		}
	}
	for _, f := range c.node.Functions {
		if !f.HasRDMA() {
			continue
		}
		for _, d := range f.RDMA {
			if hcaSet && lint.FilterSelects(hca, d.Name) {
				for _, nd := range f.Netdevs {
					training[nd] = "netdev of " + d.Name + ", selected by NCCL_IB_HCA=" + hca
				}
			}
		}
		if f.IsVF {
			for _, nd := range f.Netdevs {
				training[nd] = "netdev of the SR-IOV VF " + f.RDMAName()
			}
		}
	}
	var bad []string
	for _, l := range in.DefaultRouteLinks {
		if why, ok := training[l]; ok {
			bad = append(bad, l+" ("+why+")")
		}
	}
	if len(bad) > 0 {
		c.add(IDDefaultRoute, Fail, "the default route is on a training interface: "+strings.Join(bad, ", ")+"; pod/node traffic (DNS, API server, storage) would leave over the RDMA network",
			"no default route on the training net: drop `gateway` and any 0.0.0.0/0 entry from the NAD's IPAM `routes` (keep only the training subnet), or `ip route del default dev <if>` on the node")
		return
	}
	for _, l := range in.DefaultRouteLinks {
		f := c.node.ByNetdev(l)
		if f != nil && f.HasRDMA() && !hcaSet {
			c.add(IDDefaultRoute, Warn, fmt.Sprintf("the default route is on %s, whose RDMA device %s NCCL will also use (NCCL_IB_HCA unset)", l, f.RDMAName()),
				fmt.Sprintf("set NCCL_IB_HCA to the training HCAs (e.g. NCCL_IB_HCA=^%s) and keep %s out of the RDMA device pools", f.RDMAName(), l))
			return
		}
	}
	c.add(IDDefaultRoute, Pass, "default route via "+strings.Join(in.DefaultRouteLinks, ", ")+", not a training interface", "")
}

// ---- nccl ----

func (c *checker) nccl() {
	env := c.in.Env
	names, by := c.allDevices()

	// transport
	ibDisable, net := env["NCCL_IB_DISABLE"], env["NCCL_NET"]
	switch {
	case strings.EqualFold(net, "IB") && len(names) == 0:
		c.add(IDNCCLTransport, Fail, "NCCL_NET=IB but no RDMA device is visible: NCCL fails at init", "give the pod its RDMA device (resource request, rdma CNI) or drop NCCL_NET")
	case isTrue(ibDisable) && len(names) > 0:
		c.add(IDNCCLTransport, Warn, fmt.Sprintf("NCCL_IB_DISABLE=%s: NCCL uses TCP sockets although %d RDMA device(s) exist (tcp mode)", ibDisable, len(names)), "unset NCCL_IB_DISABLE or set it to 0 (keep it only for a socket baseline run)")
	case strings.EqualFold(net, "Socket") && len(names) > 0:
		c.add(IDNCCLTransport, Warn, fmt.Sprintf("NCCL_NET=Socket: NCCL uses TCP sockets although %d RDMA device(s) exist", len(names)), "unset NCCL_NET (or NCCL_NET=IB)")
	case len(names) == 0 && !isTrue(ibDisable) && !strings.EqualFold(net, "Socket"):
		c.add(IDNCCLTransport, Warn, "RDMA is not disabled but no RDMA device is visible: NCCL falls back to TCP sockets silently", "make the RDMA device visible (see rdma-devices), or set NCCL_IB_DISABLE=1 to make the socket transport explicit")
	case isTrue(ibDisable) || strings.EqualFold(net, "Socket"):
		c.add(IDNCCLTransport, Pass, "socket transport requested and no RDMA device visible", "")
	default:
		v := "NCCL_IB_DISABLE unset"
		if ibDisable != "" {
			v = "NCCL_IB_DISABLE=" + ibDisable
		}
		c.add(IDNCCLTransport, Pass, v+": NCCL can use the IB/RoCE transport", "")
	}

	// NCCL_IB_HCA
	selected := names
	if hca, ok := env["NCCL_IB_HCA"]; ok {
		selected = c.checkHCA(hca, names, by)
	} else if len(names) > 0 {
		c.add(IDNCCLIBHCA, Pass, fmt.Sprintf("unset: NCCL uses every visible device (%s)", strings.Join(limit(names, 8), ", ")), "")
	}

	// NCCL_SOCKET_IFNAME
	if v, ok := env["NCCL_SOCKET_IFNAME"]; ok {
		c.checkSocketIf(v)
	} else {
		c.add(IDNCCLSocketIf, Pass, "unset: NCCL picks the bootstrap interface itself (ib* first, then any but lo/docker*); set it to net1 (pod) or the node's NIC (hostNetwork) to be sure", "")
	}

	// NCCL_IB_GID_INDEX
	c.checkGIDIndex(env, selected, by)
}

func (c *checker) checkHCA(hca string, names []string, by map[string]*inventory.Function) []string {
	items, exclude := filterItems(hca)
	var netdevItems []string
	for _, it := range items {
		name := it.name
		if lint.IsVerbsDeviceName(name) {
			continue
		}
		if _, isNetdev := c.in.Netdevs[name]; isNetdev || c.node.ByNetdev(name) != nil {
			netdevItems = append(netdevItems, name)
		}
	}
	if len(netdevItems) > 0 {
		var want []string
		for _, nd := range netdevItems {
			if f := c.node.ByNetdev(nd); f != nil && f.HasRDMA() {
				want = append(want, nd+" → "+f.RDMAName())
			}
		}
		fix := "NCCL_IB_HCA takes RDMA device names (left column of ibdev2netdev)"
		if len(want) > 0 {
			fix += ": " + strings.Join(want, ", ")
		}
		c.add(IDNCCLIBHCA, Fail, fmt.Sprintf("NCCL_IB_HCA=%s names network interface(s) %s, not RDMA devices: NCCL finds no HCA and falls back to sockets", hca, strings.Join(netdevItems, ", ")), fix)
		return nil
	}
	var sel []string
	for _, n := range names {
		if lint.FilterSelects(hca, n) {
			sel = append(sel, n)
		}
	}
	if len(sel) == 0 {
		c.add(IDNCCLIBHCA, Fail, fmt.Sprintf("NCCL_IB_HCA=%s selects none of the visible RDMA devices (%s): NCCL falls back to sockets", hca, orDash(strings.Join(limit(names, 8), ", "))),
			"set NCCL_IB_HCA to devices that exist here (ibdev2netdev), or leave it unset")
		return nil
	}
	if !exclude {
		for _, it := range items {
			if it.port == 0 {
				continue
			}
			for _, n := range names {
				if !(n == it.name || (!strings.HasPrefix(hca, "=") && strings.HasPrefix(n, it.name))) {
					continue
				}
				if !hasPort(by[n], n, it.port) {
					c.add(IDNCCLIBHCA, Fail, fmt.Sprintf("NCCL_IB_HCA=%s asks for port %d of %s, which has no such port", hca, it.port, n), "use the port numbers `ibstat "+n+"` lists (usually 1)")
					return sel
				}
			}
		}
	}
	if !exclude && !strings.HasPrefix(strings.TrimSpace(hca), "=") {
		var extra []string
		for _, it := range items {
			exact := false
			var more []string
			for _, n := range sel {
				if n == it.name {
					exact = true
				} else if strings.HasPrefix(n, it.name) {
					more = append(more, n)
				}
			}
			if exact && len(more) > 0 {
				extra = append(extra, fmt.Sprintf("%s also selects %s", it.name, strings.Join(limit(more, 4), ", ")))
			}
		}
		if len(extra) > 0 {
			c.add(IDNCCLIBHCA, Warn, fmt.Sprintf("NCCL_IB_HCA=%s: entries are prefixes, so %s", hca, strings.Join(extra, "; ")),
				fmt.Sprintf("start the list with = to match exact names: NCCL_IB_HCA==%s", strings.TrimSpace(hca)))
			return sel
		}
	}
	var down []string
	for _, n := range sel {
		for _, d := range by[n].RDMA {
			if d.Name != n {
				continue
			}
			for _, p := range d.Ports {
				if p.State != "ACTIVE" {
					down = append(down, fmt.Sprintf("%s port %d (%s)", n, p.Num, orDash(p.State)))
				}
			}
		}
	}
	if len(down) > 0 {
		c.add(IDNCCLIBHCA, Warn, fmt.Sprintf("NCCL_IB_HCA=%s selects %s, but not every port is ACTIVE: %s", hca, strings.Join(limit(sel, 8), ", "), strings.Join(down, ", ")),
			"bring the ports up (see port-state) or leave them out of NCCL_IB_HCA")
		return sel
	}
	c.add(IDNCCLIBHCA, Pass, fmt.Sprintf("NCCL_IB_HCA=%s selects %s", hca, strings.Join(limit(sel, 8), ", ")), "")
	return sel
}

func hasPort(f *inventory.Function, dev string, port int) bool {
	if f == nil {
		return false
	}
	for _, d := range f.RDMA {
		if d.Name != dev {
			continue
		}
		for _, p := range d.Ports {
			if p.Num == port {
				return true
			}
		}
	}
	return false
}

type filterItem struct {
	name string
	port int
}

func filterItems(v string) (items []filterItem, exclude bool) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "^") {
		exclude, v = true, v[1:]
	}
	v = strings.TrimPrefix(v, "=")
	for _, it := range strings.Split(v, ",") {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		fi := filterItem{name: it}
		if i := strings.IndexByte(it, ':'); i >= 0 {
			fi.name = it[:i]
			fi.port, _ = strconv.Atoi(it[i+1:])
		}
		items = append(items, fi)
	}
	return items, exclude
}

func (c *checker) checkSocketIf(v string) {
	var ifs []string
	for nd := range c.in.Netdevs {
		ifs = append(ifs, nd)
	}
	sort.Strings(ifs)
	items, _ := filterItems(v)
	for _, it := range items {
		if lint.IsVerbsDeviceName(it.name) {
			c.add(IDNCCLSocketIf, Fail, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s names the RDMA device %s: it takes network interfaces", v, it.name),
				"use the netdev (ibdev2netdev's right column), e.g. net1 in an exclusive/shared pod")
			return
		}
	}
	var sel, up []string
	for _, nd := range ifs {
		if lint.FilterSelects(v, nd) {
			sel = append(sel, nd)
			if st := c.in.Netdevs[nd]; st == "up" || st == "unknown" {
				up = append(up, nd)
			}
		}
	}
	switch {
	case len(sel) == 0:
		c.add(IDNCCLSocketIf, Fail, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects no interface here (have: %s): NCCL bootstrap fails (\"no socket interface found\")", v, orDash(strings.Join(limit(ifs, 8), ", "))),
			"set it to an interface that exists: net1 (the NAD's @ifname) in exclusive/shared pods, the node's NIC in hostNetwork pods; =name matches exactly, ^ excludes, otherwise prefixes")
	case len(up) == 0:
		c.add(IDNCCLSocketIf, Fail, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects %s, none of which is up", v, strings.Join(sel, ", ")), "bring the interface up or select another one")
	default:
		c.add(IDNCCLSocketIf, Pass, fmt.Sprintf("NCCL_SOCKET_IFNAME=%s selects %s", v, strings.Join(limit(sel, 8), ", ")), "")
	}
}

func (c *checker) checkGIDIndex(env map[string]string, selected []string, by map[string]*inventory.Function) {
	type rec struct {
		name string
		idx  int
		ok   bool
		port inventory.Port
	}
	var roce []rec
	for _, n := range selected {
		f := by[n]
		if f == nil {
			continue
		}
		for _, d := range f.RDMA {
			if d.Name != n {
				continue
			}
			for _, p := range d.Ports {
				if p.LinkLayer != inventory.LinkEthernet {
					continue
				}
				i, ok := p.RecommendedGIDIndex()
				roce = append(roce, rec{fmt.Sprintf("%s port %d", n, p.Num), i, ok, p})
			}
		}
	}
	v, set := env["NCCL_IB_GID_INDEX"]
	idxs := map[int][]string{}
	var noRec []string
	for _, r := range roce {
		if r.ok {
			idxs[r.idx] = append(idxs[r.idx], r.name)
		} else {
			noRec = append(noRec, r.name)
		}
	}
	if len(roce) == 0 {
		if set {
			c.add(IDNCCLGIDIndex, Pass, fmt.Sprintf("NCCL_IB_GID_INDEX=%s is ignored: no selected RoCE port (InfiniBand needs no GID index)", v), "")
		} else if len(selected) > 0 {
			c.add(IDNCCLGIDIndex, Pass, "no selected RoCE port: InfiniBand needs no NCCL_IB_GID_INDEX", "")
		}
		return
	}
	keys := make([]int, 0, len(idxs))
	for k := range idxs {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	layout := func() string {
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%d on %s", k, strings.Join(limit(idxs[k], 4), ", ")))
		}
		return strings.Join(parts, "; ")
	}
	if !set {
		switch len(keys) {
		case 0:
			c.add(IDNCCLGIDIndex, Warn, "unset, and no selected RoCE port has a RoCEv2 IPv4 GID", "give the training netdevs their IPv4 addresses (see roce-gid)")
		case 1:
			c.add(IDNCCLGIDIndex, Pass, fmt.Sprintf("unset: NCCL ≥ 2.21 finds the RoCEv2 GID itself; older NCCL needs NCCL_IB_GID_INDEX=%d (the RoCEv2 IPv4 index of the selected ports)", keys[0]), "")
		default:
			c.add(IDNCCLGIDIndex, Warn, "unset, and the selected RoCE ports keep their RoCEv2 IPv4 GID at different indexes ("+layout()+"): one NCCL_IB_GID_INDEX cannot fit all",
				"use NCCL ≥ 2.21 (dynamic GID selection), or restrict NCCL_IB_HCA to ports with the same layout")
		}
		return
	}
	want, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || want < 0 {
		c.add(IDNCCLGIDIndex, Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%q is not a GID index", v), "set it to the RoCEv2 IPv4 index show_gids lists, or unset it")
		return
	}
	var wrong []string
	for _, k := range keys {
		if k != want {
			for _, n := range idxs[k] {
				wrong = append(wrong, fmt.Sprintf("%s has it at %d", n, k))
			}
		}
	}
	if len(wrong) > 0 {
		fix := "set NCCL_IB_GID_INDEX to the index of the v2 row with an IPv4 address in show_gids"
		if len(keys) == 1 {
			fix = fmt.Sprintf("NCCL_IB_GID_INDEX=%d (or unset it with NCCL ≥ 2.21)", keys[0])
		}
		what := ""
		for _, r := range roce {
			for _, g := range r.port.GIDs {
				if g.Index == want {
					what = fmt.Sprintf(" (index %d is RoCE %s%s on %s)", want, g.Type, ifStr(g.IPv4 == "", ", no IPv4", " "+g.IPv4), r.name)
					break
				}
			}
			if what != "" {
				break
			}
		}
		c.add(IDNCCLGIDIndex, Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%d but the RoCEv2 IPv4 GID is elsewhere: %s%s; NCCL initialises but connections time out or crawl", want, strings.Join(limit(wrong, 6), ", "), what), fix)
		return
	}
	if len(keys) == 0 {
		c.add(IDNCCLGIDIndex, Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%d but no selected RoCE port has a RoCEv2 IPv4 GID (%s)", want, strings.Join(limit(noRec, 6), ", ")), "give the training netdevs their IPv4 addresses (see roce-gid)")
		return
	}
	msg := fmt.Sprintf("NCCL_IB_GID_INDEX=%d is the RoCEv2 IPv4 index of %s", want, strings.Join(limit(idxs[want], 6), ", "))
	if len(noRec) > 0 && env["NCCL_IB_HCA"] != "" {
		c.add(IDNCCLGIDIndex, Warn, msg+fmt.Sprintf("; but %s have no RoCEv2 IPv4 GID", strings.Join(limit(noRec, 6), ", ")), "give those netdevs IPv4 addresses or leave them out of NCCL_IB_HCA")
		return
	}
	c.add(IDNCCLGIDIndex, Pass, msg, "")
}

// ---- helpers ----

func isTrue(v string) bool {
	v = strings.TrimSpace(strings.ToLower(v))
	return v == "1" || v == "true" || v == "yes" || v == "on"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ifStr(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	out := append([]string(nil), s[:n]...)
	return append(out, fmt.Sprintf("… (%d more)", len(s)-n))
}

func appendUniq(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func bytesStr(b uint64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d bytes", b)
}

var numSuffix = regexp.MustCompile(`^(.*?)(\d+)$`)

// natLess orders mlx5_2 before mlx5_10.
func natLess(a, b string) bool {
	ma, mb := numSuffix.FindStringSubmatch(a), numSuffix.FindStringSubmatch(b)
	if ma != nil && mb != nil && ma[1] == mb[1] {
		x, _ := strconv.Atoi(ma[2])
		y, _ := strconv.Atoi(mb[2])
		return x < y
	}
	return a < b
}
