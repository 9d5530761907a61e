package doctor

// The RDMA layer: the RDMA subsystem's netns mode (netns), RoCE GIDs
// (gid), /dev/infiniband (dev) and the memlock limit (memlock).

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

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
