package cluster

import (
	"fmt"
	"os/exec"
	"strings"
)

// The node's links, all created inside the two namespaces (never in the
// machine's own):
//
//	node netns                                  fabric netns
//	eno1          10.250.0.2/24 (default route) ── fab-uplink 10.250.0.1/24
//	enp65s0f0np0  exclusive PF (fixture)        ── fab-expf
//	enp65s0f0v0.. VF netdevs (fixture VFs)      ── fab-vf0..
//	ens8f0np0     shared HCA PF, 192.168.2.10   ── fab-shpf
//	cni0          the bridge network's bridge (made by the bridge plugin)
//
// plus one iptables DNAT rule in the node: the kubernetes Service address
// to the API server (the role kube-proxy plays in a cluster; the node runs
// no kube-proxy).
func setupNetwork() error {
	steps := [][]string{
		{"ip", "netns", "add", NodeNetns},
		{"ip", "netns", "add", WireNetns},
		{"ip", "-n", NodeNetns, "link", "set", "lo", "up"},
		{"ip", "-n", WireNetns, "link", "set", "lo", "up"},
	}
	pair := func(node, fab string, mtu string) {
		steps = append(steps,
			[]string{"ip", "-n", NodeNetns, "link", "add", node, "mtu", mtu, "type", "veth", "peer", "name", fab, "netns", WireNetns},
			[]string{"ip", "-n", NodeNetns, "link", "set", node, "up"},
			[]string{"ip", "-n", WireNetns, "link", "set", fab, "up"},
		)
	}
	pair(UplinkDev, "fab-uplink", "1500")
	pair(ExclusivePF, "fab-expf", "9000")
	pair(SharedPF, "fab-shpf", "9000")
	for i := 0; i < NumVFs; i++ {
		pair(VFNetdev(i), fmt.Sprintf("fab-vf%d", i), "9000")
	}
	steps = append(steps,
		[]string{"ip", "-n", NodeNetns, "addr", "add", NodeIP + NodeCIDR, "dev", UplinkDev},
		[]string{"ip", "-n", WireNetns, "addr", "add", FabricIP + NodeCIDR, "dev", "fab-uplink"},
		[]string{"ip", "-n", NodeNetns, "route", "add", "default", "via", FabricIP},
		[]string{"ip", "-n", NodeNetns, "addr", "add", "192.168.2.10/24", "dev", SharedPF},
		[]string{"ip", "-n", NodeNetns, "addr", "add", "10.0.1.100/24", "dev", ExclusivePF},
		[]string{"ip", "netns", "exec", NodeNetns, "iptables", "-t", "nat", "-A", "OUTPUT",
			"-d", ServiceIP, "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", NodeIP, APIPort)},
		[]string{"ip", "netns", "exec", NodeNetns, "iptables", "-t", "nat", "-A", "PREROUTING",
			"-d", ServiceIP, "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", NodeIP, APIPort)},
		[]string{"ip", "netns", "exec", NodeNetns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	)
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("node network: %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// teardownNetwork deletes both namespaces (and with them every link in
// them). Missing namespaces are fine: down is idempotent.
func teardownNetwork() error {
	var errs []string
	for _, n := range []string{NodeNetns, WireNetns} {
		if !netnsExists(n) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", n).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Sprintf("ip netns del %s: %v: %s", n, err, strings.TrimSpace(string(out))))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("node network: %s", strings.Join(errs, "; "))
	}
	return nil
}

func netnsExists(name string) bool { return fileExists("/run/netns/" + name) }
