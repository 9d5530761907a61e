package sim

// What an attached pod got, read back into its PodReport: interfaces, device, RDMA placement, NCCL env.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/lint"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// NCCL env that fits each mode.
func ncclFor(mode, ifname, hca string) []EnvVar {
	switch mode {
	case ModeExclusive:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "bootstrap over the training net"},
			{Name: "NCCL_IB_HCA", Value: "", Why: "not needed: the pod's netns holds only its VF's RDMA device " + hca}}
	case ModeShared:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "bootstrap over the macvlan training net"},
			{Name: "NCCL_IB_HCA", Value: "=" + hca, Why: "shared netns mode shows every HCA of the node; pin the one behind " + ifname}}
	case ModeIBExclusive:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "bootstrap over the VF's IPoIB netdev"},
			{Name: "NCCL_IB_HCA", Value: "", Why: "not needed: the pod's netns holds only its VF's RDMA device " + hca},
			{Name: "NCCL_IB_GID_INDEX", Value: "", Why: "not needed on InfiniBand (no RoCE v1/v2 GID choice)"}}
	case ModeIBShared:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "bootstrap over the IPoIB child"},
			{Name: "NCCL_IB_HCA", Value: "=" + hca, Why: "shared netns mode shows every HCA of the node; pin the port under " + ifname + "'s parent " + IBSharedPort},
			{Name: "NCCL_IB_GID_INDEX", Value: "", Why: "not needed on InfiniBand (no RoCE v1/v2 GID choice)"}}
	default:
		return []EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=" + ifname, Why: "the host's RoCE NIC"},
			{Name: "NCCL_IB_HCA", Value: "=" + hca, Why: "the host namespace shows every HCA and VF; pin the one behind " + ifname}}
	}
}

// describe reads back what the pod got: interfaces, addresses, routes, the
// device, the RDMA device's placement, network-status, and the NCCL env.
func describe(r *podRun, l layout, m *Manifests) error {
	n := r.node
	hca := n.fix.RDMAByBD[SharedPFBDF]
	switch r.mode {
	case ModeHost:
		// hostNetwork: the pod shares the node's namespace; no CNI ran.
		err := n.host.Do(func(ns.NetNS) error {
			lk, err := netops.LinkByName(SharedPF)
			if err != nil {
				return err
			}
			as, err := netops.Addrs(SharedPF)
			if err != nil {
				return err
			}
			iface := Interface{Name: SharedPF, PCI: SharedPFBDF, MAC: lk.MAC.String(), Kind: "host NIC", IPs: []string{}}
			for _, a := range as {
				if !a.IP.IsLinkLocalUnicast() {
					iface.IPs = append(iface.IPs, a.String())
				}
			}
			iface.Routes, err = netops.Routes(SharedPF)
			r.rep.Interfaces = append(r.rep.Interfaces, iface)
			return err
		})
		if err != nil {
			return fmt.Errorf("pod %s/%s: read the host's %s: %w", r.pod.Namespace, r.pod.Name, SharedPF, err)
		}
	default:
		err := r.netns.Do(func(ns.NetNS) error {
			ls, err := netops.Links()
			if err != nil {
				return err
			}
			sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
			for _, lk := range ls {
				if lk.Name == "lo" {
					continue
				}
				iface := Interface{Name: lk.Name, MAC: lk.MAC.String(), Kind: lk.Kind, IPs: []string{}}
				as, err := netops.Addrs(lk.Name)
				if err != nil {
					return err
				}
				for _, a := range as {
					if !a.IP.IsLinkLocalUnicast() {
						iface.IPs = append(iface.IPs, a.String())
					}
				}
				if iface.Routes, err = netops.Routes(lk.Name); err != nil {
					return err
				}
				for _, rt := range iface.Routes {
					if rt == "default" {
						r.rep.DefaultRoute = lk.Name
					}
				}
				r.rep.Interfaces = append(r.rep.Interfaces, iface)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("pod %s/%s: read its netns %s: %w", r.pod.Namespace, r.pod.Name, r.netns.Path(), err)
		}
		if b, err := os.ReadFile(filepath.Join(l.statusDir(), r.pod.Namespace+"_"+r.pod.Name+".json")); err == nil {
			var v any
			if json.Unmarshal(b, &v) == nil {
				c, _ := json.Marshal(v)
				r.rep.NetworkStatus = c
			}
		} else {
			return fmt.Errorf("pod %s/%s: no network-status was recorded: %w", r.pod.Namespace, r.pod.Name, err)
		}
	}
	var ifname string
	switch r.mode {
	case ModeExclusive:
		ifname = "net1"
		vfs := r.rep.Devices[ExclusiveResource]
		if len(vfs) != 1 {
			return fmt.Errorf("pod %s/%s: kubelet allocated %d VFs of %s, want 1", r.pod.Namespace, r.pod.Name, len(vfs), ExclusiveResource)
		}
		vf := vfs[0]
		dev := n.fix.RDMAByBD[vf]
		r.rep.Device = fmt.Sprintf("VF %s (%s)", vf, n.fix.NetByBDF[vf])
		for i := range r.rep.Interfaces {
			if r.rep.Interfaces[i].Name == ifname {
				r.rep.Interfaces[i].PCI = vf
			}
		}
		in, err := n.rec.InNetns(dev, r.netns)
		if err != nil {
			return err
		}
		if in {
			r.rep.RDMA = dev + " moved into the pod netns (recorded)"
		} else {
			r.rep.RDMA = dev + " NOT in the pod netns"
			r.rep.Notes = append(r.rep.Notes, "the VF's RDMA device was not moved into the pod")
		}
		r.rep.NCCL = ncclFor(r.mode, ifname, dev)
	case ModeShared:
		ifname = "net1"
		for i := range r.rep.Interfaces {
			if r.rep.Interfaces[i].Name == ifname {
				r.rep.Interfaces[i].PCI = SharedPFBDF
				r.rep.Interfaces[i].Kind = "macvlan on " + SharedPF
			}
		}
		r.rep.Device = fmt.Sprintf("HCA %s (%s) slot %s", hca, SharedPFBDF, strings.Join(r.rep.Devices[SharedResource], ","))
		in, err := n.rec.InNetns(hca, r.netns)
		if err != nil {
			return err
		}
		r.rep.RDMA = hca + " shared: visible from the pod netns (shared netns mode)"
		if !in {
			r.rep.RDMA = hca + " NOT visible from the pod netns"
		}
		r.rep.NCCL = ncclFor(r.mode, ifname, hca)
	case ModeIBExclusive:
		ifname = "net1"
		if err := describeIBExclusive(r, m); err != nil {
			return err
		}
	case ModeIBShared:
		ifname = "net1"
		if err := describeIBShared(r); err != nil {
			return err
		}
	case ModeHost:
		ifname = SharedPF
		r.rep.Device = fmt.Sprintf("HCA %s (%s) slot %s", hca, SharedPFBDF, strings.Join(r.rep.Devices[SharedResource], ","))
		r.rep.RDMA = hca + " in the host netns, which the pod shares"
		r.rep.NCCL = ncclFor(r.mode, ifname, hca)
	}
	if r.mode != ModeHost {
		if r.rep.DefaultRoute != "eth0" {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the default route is on %q, not eth0", r.rep.DefaultRoute))
		}
		if !hasIface(r.rep.Interfaces, "eth0") || !hasIface(r.rep.Interfaces, "net1") {
			return fmt.Errorf("pod %s/%s: interfaces %v, want eth0 and net1", r.pod.Namespace, r.pod.Name, ifaceNames(r.rep.Interfaces))
		}
	}
	// what the pod's own env says, against what fits
	env := map[string]string{}
	for _, e := range r.pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for _, e := range r.rep.NCCL {
		have, set := env[e.Name]
		if !set || e.Value == "" {
			continue
		}
		target := strings.TrimPrefix(e.Value, "=")
		if !lint.FilterSelects(have, target) {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the pod sets %s=%s, which does not select %s on this node; use %s=%s", e.Name, have, target, e.Name, e.Value))
		}
	}
	return nil
}

func hasIface(ifs []Interface, name string) bool {
	for _, i := range ifs {
		if i.Name == name {
			return true
		}
	}
	return false
}

func ifaceNames(ifs []Interface) []string {
	var out []string
	for _, i := range ifs {
		out = append(out, i.Name)
	}
	return out
}
