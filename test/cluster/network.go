package cluster

import (
	"fmt"
	"os/exec"
	"strings"
)

// The cluster's links, all created inside namespaces of its own (never in
// the machine's). Per node (its namespace ── the fabric namespace):
//
//	eno1          10.250.0.<2+i>/24 (default route) ── n<k>-up    port of br-mgmt
//	enp65s0f0np0  exclusive PF (fixture), 10.0.1.<100+i> ── n<k>-expf  port of br-train
//	enp65s0f0v0.. VF netdevs (fixture VFs)           ── n<k>-vf0.. ports of br-train
//	enp143s0f0np0 second VF PF (multi-node), 10.0.3.<100+i> ── n<k>-expf2
//	enp143s0f0v0.. its VF netdevs                    ── n<k>-wf0.. ports of br-train
//	ens8f0np0     shared HCA PF, 192.168.2.<10+i>    ── n<k>-shpf  port of br-train
//	ibp193s0f0    IB PF's IPoIB netdev (multi-node)  ── n<k>-ibpf  port of br-ib
//	ibp193s0f1    IB port 2 (shared IPoIB port)      ── n<k>-ibsh  port of br-ib
//	ibp193s0f0v0.. its VFs' IPoIB netdevs            ── n<k>-ib0.. ports of br-ib
//	cni0          the bridge network's bridge (made by the bridge plugin)
//
// The fabric namespace holds the networks that join the nodes:
//
//	br-mgmt   10.250.0.1/24: the management network (node uplinks); it routes
//	          each node's pod CIDR to that node, as the cluster's own CNI would
//	br-train  the training fabric: one L2 segment, MTU 9000, joining every
//	          node's PF and VF stand-ins (what the RDMA switch is to net1)
//	br-ib     the InfiniBand fabric (multi-node): one L2 segment, MTU 4092,
//	          joining the IB stand-ins (what one IPoIB partition is to net1;
//	          the partitions themselves are the subnet manager's, not here)
//
// Each node also routes the other nodes' pod CIDRs straight to them (same
// L2), so pod-to-pod traffic between nodes keeps its addresses (the bridge
// network does not masquerade). Services are kube-proxy's (iptables mode,
// every node); with no kube-proxy built the first node falls back to one
// DNAT rule for the kubernetes Service.
func setupNetwork(nodes []Node, kubeProxy bool) error {
	steps := [][]string{
		{"ip", "netns", "add", WireNetns},
		{"ip", "-n", WireNetns, "link", "set", "lo", "up"},
		{"ip", "-n", WireNetns, "link", "add", "br-mgmt", "type", "bridge"},
		{"ip", "-n", WireNetns, "link", "add", "br-train", "mtu", "9000", "type", "bridge"},
		{"ip", "-n", WireNetns, "link", "set", "br-mgmt", "up"},
		{"ip", "-n", WireNetns, "link", "set", "br-train", "up"},
		{"ip", "-n", WireNetns, "addr", "add", FabricIP + NodeCIDR, "dev", "br-mgmt"},
		{"ip", "netns", "exec", WireNetns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	if len(nodes) > 0 && nodes[0].Board() {
		steps = append(steps,
			[]string{"ip", "-n", WireNetns, "link", "add", IBBridge, "mtu", IBMTU, "type", "bridge"},
			[]string{"ip", "-n", WireNetns, "link", "set", IBBridge, "up"})
	}
	for _, n := range nodes {
		steps = append(steps, nodeNetworkSteps(n, nodes, kubeProxy)...)
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("cluster network: %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// nodeLink is one of a node's veth pairs: its end in the node, its end in
// the fabric and the fabric bridge that end joins.
type nodeLink struct{ dev, fab, mtu, bridge string }

// nodeLinks are node n's uplink, PFs and VF stand-ins.
func nodeLinks(n Node) []nodeLink {
	links := []nodeLink{
		{UplinkDev, FabricPort(n, "up"), "1500", "br-mgmt"},
		{ExclusivePF, FabricPort(n, "expf"), "9000", "br-train"},
		{SharedPF, FabricPort(n, "shpf"), "9000", "br-train"},
	}
	if n.Board() {
		links = append(links, nodeLink{SecondPF, FabricPort(n, "expf2"), "9000", "br-train"})
	}
	for _, vf := range vfLinks(n) {
		links = append(links, nodeLink{vf[0], FabricPort(n, vf[1]), "9000", "br-train"})
	}
	for _, ib := range ibLinks(n) {
		links = append(links, nodeLink{ib[0], FabricPort(n, ib[1]), IBMTU, IBBridge})
	}
	return links
}

// linkSteps creates one of node n's veth pairs.
func linkSteps(n Node, l nodeLink) [][]string {
	return [][]string{
		// Both ends get the MTU: a veth peer created without one has
		// 1500, and a bridge takes its ports' smallest (kubectl rdma
		// verify found 9000-byte DF datagrams lost across nodes).
		{"ip", "-n", n.Netns, "link", "add", l.dev, "mtu", l.mtu, "type", "veth", "peer", "name", l.fab, "mtu", l.mtu, "netns", WireNetns},
		{"ip", "-n", WireNetns, "link", "set", l.fab, "master", l.bridge},
		{"ip", "-n", n.Netns, "link", "set", l.dev, "up"},
		{"ip", "-n", WireNetns, "link", "set", l.fab, "up"},
	}
}

// nodeNetworkSteps creates node n's namespace, links, addresses and routes.
func nodeNetworkSteps(n Node, all []Node, kubeProxy bool) [][]string {
	steps := [][]string{
		{"ip", "netns", "add", n.Netns},
		{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
	}
	for _, l := range nodeLinks(n) {
		steps = append(steps, linkSteps(n, l)...)
	}
	steps = append(steps,
		[]string{"ip", "-n", n.Netns, "addr", "add", n.IP + NodeCIDR, "dev", UplinkDev},
		[]string{"ip", "-n", n.Netns, "route", "add", "default", "via", FabricIP},
		[]string{"ip", "-n", n.Netns, "addr", "add", n.SharedPFIP() + "/24", "dev", SharedPF},
		[]string{"ip", "-n", n.Netns, "addr", "add", n.ExclusivePFIP() + "/24", "dev", ExclusivePF},
	)
	if n.Board() {
		steps = append(steps, []string{"ip", "-n", n.Netns, "addr", "add", n.SecondPFIP() + "/24", "dev", SecondPF})
	}
	steps = append(steps,
		[]string{"ip", "netns", "exec", n.Netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		// the fabric's route to the node's pods
		[]string{"ip", "-n", WireNetns, "route", "add", n.PodCIDR, "via", n.IP},
	)
	for _, peer := range all {
		if peer.Index != n.Index {
			steps = append(steps, []string{"ip", "-n", n.Netns, "route", "add", peer.PodCIDR, "via", peer.IP})
		}
	}
	if n.ControlPlane() && !kubeProxy {
		for _, chain := range []string{"OUTPUT", "PREROUTING"} {
			steps = append(steps, []string{"ip", "netns", "exec", n.Netns, "iptables", "-t", "nat", "-A", chain,
				"-d", ServiceIP, "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", n.IP, APIPort)})
		}
	}
	return steps
}

// restoreVFLinks recreates the VF stand-ins node n lost: a veth end that
// was in a pod's network namespace when the node crashed is destroyed with
// that namespace (a real VF's netdev returns to the host; a veth does not),
// as a rebooted machine's VFs come back when sriov_numvfs is set at boot.
// It returns the names it recreated.
func restoreVFLinks(n Node) ([]string, error) {
	var made []string
	for _, l := range nodeLinks(n) {
		if exec.Command("ip", "-n", n.Netns, "link", "show", "dev", l.dev).Run() == nil {
			continue
		}
		_ = exec.Command("ip", "-n", WireNetns, "link", "del", l.fab).Run() // a dangling peer, if any
		for _, s := range linkSteps(n, l) {
			if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
				return made, fmt.Errorf("node %s: restore %s: %s: %v: %s", n.Name, l.dev, strings.Join(s, " "), err, strings.TrimSpace(string(out)))
			}
		}
		made = append(made, l.dev)
	}
	return made, nil
}

// teardownNetwork deletes every namespace of the cluster (and with them
// every link in them): the nodes' and the fabric's. Missing namespaces are
// fine: down is idempotent. Node namespaces are found by name, so a state
// directory that lost its node list still cleans up.
func teardownNetwork() error {
	var errs []string
	for _, n := range clusterNetns() {
		if out, err := exec.Command("ip", "netns", "del", n).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Sprintf("ip netns del %s: %v: %s", n, err, strings.TrimSpace(string(out))))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster network: %s", strings.Join(errs, "; "))
	}
	return nil
}

// clusterNetns lists the existing namespaces that belong to a cluster:
// the fabric's and every node's (NodeNetns, NodeNetns-<k>).
func clusterNetns() []string {
	var out []string
	for _, name := range []string{NodeNetns, WireNetns} {
		if netnsExists(name) {
			out = append(out, name)
		}
	}
	for k := 2; k <= MaxNodes; k++ {
		if name := fmt.Sprintf("%s-%d", NodeNetns, k); netnsExists(name) {
			out = append(out, name)
		}
	}
	return out
}

func netnsExists(name string) bool { return fileExists("/run/netns/" + name) }
